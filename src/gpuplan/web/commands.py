"""Read a CLI command's parameters from its typer declaration (one source of truth).

Each parameter becomes a `Param`: the API field name is the CLI's long option name in
snake_case (`--micro-batch` -> `micro_batch`, `--usd-per-gpu-hour` -> `usd_per_gpu_hour`); the
positional argument keeps its Python name (`model`). Type, choices, bounds, default and whether
it is required come from the same `Annotated[..., typer.Option(...)]` the CLI parses.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import typer

# Parameters the API never exposes: output switches the API sets itself, and anything that
# names a file on the server (the API reads no file the user did not upload).
_HIDDEN_FLAGS = frozenset({"--json"})


@dataclass(frozen=True)
class Param:
    """One CLI parameter as the API sees it."""

    name: str                      # the Python parameter name (the CLI function's keyword)
    field: str                     # the API field name (snake_case long option, or argument name)
    flag: str | None               # the long option ('--micro-batch'); None for a positional
    kind: Any                      # int, float, bool, str, an Enum subclass, Path, list[...]
    optional: bool                 # None is allowed (the CLI's `X | None` options)
    required: bool
    default: Any
    minimum: float | None
    maximum: float | None
    help: str | None
    aliases: tuple[str, ...] = ()  # further long names of the option ('--batch' -> 'batch')


def _base_type(hint: Any) -> tuple[Any, bool]:
    """(the type without Optional, whether None is allowed)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return (args[0] if len(args) == 1 else Any), True
    return hint, False


def _long_flags(info: Any, name: str) -> list[str]:
    """Every long name of an option, the first one first ('--micro-batch', '--batch')."""
    default = getattr(info, "default", None)
    decls = [default] if isinstance(default, str) else []
    decls += list(getattr(info, "param_decls", None) or ())
    flags = [part for d in decls for part in str(d).split("/") if part.startswith("--")]
    return flags or ["--" + name.replace("_", "-")]


def command_params(fn: Callable[..., Any]) -> list[Param]:
    """Every parameter of a typer command function, in declaration order."""
    hints = typing.get_type_hints(fn, include_extras=True)
    out: list[Param] = []
    for name, p in inspect.signature(fn).parameters.items():
        hint = hints.get(name, str)
        if typing.get_origin(hint) is typing.Annotated:
            base, *meta = typing.get_args(hint)
        else:
            base, meta = hint, []
        if base is typer.Context:
            continue
        infos = (typer.models.OptionInfo, typer.models.ArgumentInfo)
        info = next((m for m in meta if isinstance(m, infos)), None)
        default = None if p.default is inspect.Parameter.empty else p.default
        required = p.default is inspect.Parameter.empty
        if isinstance(p.default, infos):  # the older style: x: int = typer.Option(1, "--x")
            info = p.default
            default = None if info.default is ... else info.default
            required = info.default is ...
        kind, optional = _base_type(base)
        # a bare parameter: typer makes it an argument without a default, else an option
        is_arg = isinstance(info, typer.models.ArgumentInfo) or (info is None and required)
        flags = [] if is_arg else _long_flags(info, name)
        flag = flags[0] if flags else None
        out.append(Param(
            name=name, field=name if flag is None else flag[2:].replace("-", "_"), flag=flag,
            kind=kind, optional=optional, required=required,
            default=default.value if isinstance(default, Enum) else default,
            minimum=getattr(info, "min", None), maximum=getattr(info, "max", None),
            help=getattr(info, "help", None),
            aliases=tuple(f[2:].replace("-", "_") for f in flags[1:] if not f.startswith("--no-"))))
    return out


def element(kind: Any) -> tuple[Any, bool]:
    """(the element type, whether the option repeats: `list[X]`)."""
    if typing.get_origin(kind) in (list, tuple, set, frozenset):
        args = typing.get_args(kind)
        return (args[0] if args else str), True
    return kind, False


def api_params(fn: Callable[..., Any]) -> list[Param]:
    """The parameters the API accepts: not the output switches, not file paths."""
    def is_path(p: Param) -> bool:
        k = element(p.kind)[0]
        return isinstance(k, type) and issubclass(k, Path)

    return [p for p in command_params(fn) if p.flag not in _HIDDEN_FLAGS and not is_path(p)]


def registered_commands(app: typer.Typer) -> dict[str, Callable[..., Any]]:
    """{command name: function} as the CLI registered them."""
    out: dict[str, Callable[..., Any]] = {}
    for ci in app.registered_commands:
        if ci.callback is not None:
            out[ci.name or ci.callback.__name__.replace("_", "-")] = ci.callback
    return out
