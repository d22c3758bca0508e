"""Pydantic request models generated from the CLI's parameters (see `commands.py`).

The model carries the CLI's own types, choices, bounds and defaults, so FastAPI validates a body
as the CLI validates its options and `/openapi.json` describes exactly what the CLI accepts. Two
things are stricter than the CLI, because a web server must not act on them: a string that names
a file (the API reads only what the user uploaded: a model's `config.json` as JSON content in
`config`), and sizes beyond `INT_LIMIT` / `FLOAT_LIMIT` (no option means anything there).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    create_model,
    model_validator,
)

from gpuplan.web.commands import Param, element

INT_LIMIT = 2**31 - 1   # no count (GPUs, batch, tokens per sequence, layers...) is near this
FLOAT_LIMIT = 1e18      # tokens to train on, dollars, GB/s: 1e18 is beyond any real value
STR_LIMIT = 200         # names and choices are short

_PATHY = re.compile(r"[/\\\x00]|^[~.]|\.(toml|json)$", re.IGNORECASE)


def _not_a_bool(v: Any) -> Any:
    """JSON true/false is not a count or an amount (pydantic would read true as 1)."""
    if isinstance(v, bool):
        raise ValueError("expected a number, not true/false")
    return v


def _not_a_path(v: str) -> str:
    if _PATHY.search(v):
        raise ValueError("file paths are not accepted by the web API; give a catalog name "
                         "(a model's config.json goes in 'config' as JSON)")
    return v


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_model_source(self) -> _Request:
        fields = type(self).model_fields
        if "config" in fields and "model" in fields:
            has_model, has_config = self.model is not None, self.config is not None  # type: ignore[attr-defined]
            if has_model == has_config:
                raise ValueError("give exactly one of 'model' (a preset name) and 'config' "
                                 "(the contents of a Hugging Face config.json)")
        return self


LIST_LIMIT = 64         # items of a repeated option


def _annotation(p: Param) -> Any:
    k, repeated = element(p.kind)
    if isinstance(k, type) and issubclass(k, Enum):
        base: Any = k
    elif k is bool:
        base = bool
    elif k is int:
        lo = -INT_LIMIT if p.minimum is None else int(p.minimum)
        hi = INT_LIMIT if p.maximum is None else min(int(p.maximum), INT_LIMIT)
        base = Annotated[int, Field(ge=lo, le=hi), BeforeValidator(_not_a_bool)]
    elif k is float:
        lo_f = -FLOAT_LIMIT if p.minimum is None else float(p.minimum)
        hi_f = FLOAT_LIMIT if p.maximum is None else min(float(p.maximum), FLOAT_LIMIT)
        base = Annotated[float, Field(ge=lo_f, le=hi_f), BeforeValidator(_not_a_bool)]
    else:
        # a number where the CLI takes text (`--prompt-len 512` or `uniform:100:300`) is that text
        base = Annotated[str, Field(min_length=1, max_length=STR_LIMIT,
                                    coerce_numbers_to_str=True), AfterValidator(_not_a_path)]
    if repeated:
        base = Annotated[list[base], Field(max_length=LIST_LIMIT)]  # type: ignore[valid-type]
    return base | None if p.optional else base


def _describe(p: Param) -> str:
    cli = p.flag or f"the {p.name.upper()} argument"
    also = f"; also accepted as {', '.join(repr(a) for a in p.aliases)}" if p.aliases else ""
    return f"{p.help + ' ' if p.help else ''}(CLI: {cli}{also})"


def request_model(command: str, params: list[Param]) -> type[BaseModel]:
    """The request body of `POST /api/<command>`."""
    fields: dict[str, Any] = {}
    for p in params:
        ann = _annotation(p)
        if p.field == "model" and p.flag is None:  # the model: a preset, or an uploaded config
            fields["model"] = (ann | None, Field(None, description=(
                "model preset name (GET /api/catalog lists them); or give 'config'")))
            fields["config"] = (dict[str, Any] | None, Field(None, description=(
                "the contents of a Hugging Face config.json, as a JSON object")))
            continue
        default = ... if p.required else p.default
        alias = AliasChoices(p.field, *p.aliases) if p.aliases else None
        fields[p.field] = (ann, Field(default, description=_describe(p), validation_alias=alias))
    name = "".join(w.capitalize() for w in re.split(r"[-_]", command)) + "Request"
    return create_model(name, __base__=_Request, **fields)
