"""Run a CLI command in-process on a validated request; return exactly its `--json` object.

The body becomes the CLI's argument list and goes through the same typer app as a shell
command, with `--json`; what the command prints is parsed back. User errors become `ApiError`
naming the API field. Calls run one at a time (the estimators are CPU-bound and the command
prints to the process's stdout) and each gets at most `timeout_s` of wall time: past it the
client gets a 503 and the calculation is stopped (an exception raised in its thread at the next
Python instruction, CPython's PyThreadState_SetAsyncExc), so one runaway request cannot hold
the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import re
import tempfile
import threading
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from gpuplan.errors import GpuplanError
from gpuplan.web.commands import Param

_LOCK = threading.Lock()


class CalculationStopped(BaseException):
    """Raised inside a calculation's thread when it ran past its time limit."""


def _stop(thread: threading.Thread, grace_s: float = 2.0) -> None:
    """Raise CalculationStopped in `thread` (between two Python instructions) and wait."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(CalculationStopped))
    thread.join(grace_s)


class ApiError(Exception):
    """An error for the client: HTTP status, the field at fault (or None) and one line."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


def _value(v: Any) -> str:
    if isinstance(v, Enum):
        return str(v.value)
    return repr(v) if isinstance(v, float) else str(v)


def to_argv(command: str, params: list[Param], body: BaseModel, model_path: str | None) -> list[str]:
    """The CLI's argument list for a request: the options the body gave (the CLI applies its
    own defaults to the rest, and knows which were given), as --name=value; positionals after
    `--`."""
    argv, positional = [command], []
    given = body.model_fields_set
    for p in params:
        v = model_path if (p.field == "model" and model_path) else getattr(body, p.field)
        if v is None or (p.flag is not None and p.field not in given):
            continue
        if p.flag is None:
            positional += [_value(x) for x in v] if isinstance(v, list) else [_value(v)]
        elif p.kind is bool:
            if v != bool(p.default):
                argv.append(p.flag if v else "--no-" + p.flag[2:])
        elif isinstance(v, list):  # a repeated option: --x=a --x=b
            argv += [f"{p.flag}={_value(x)}" for x in v]
        else:
            argv.append(f"{p.flag}={_value(v)}")
    return [*argv, "--json", "--", *positional]


def _field_of(e: Exception, fields: set[str]) -> str | None:
    raw = getattr(e, "field", None)
    param = getattr(e, "param", None)
    if raw is None and param is not None:
        raw = getattr(param, "name", None)
    if raw is None:
        m = re.match(r"\s*([-\w.]+):", str(e))
        raw = m.group(1) if m else None
    if raw is None:
        return None
    name = (str(raw).split() or [""])[0].lstrip("-").replace("-", "_")
    aliases = {"device": "gpu", "as_json": None}
    if name in fields:
        return name
    if "config.json" in str(raw) or "config.json" in str(e):
        return "config" if "config" in fields else "model"
    return aliases.get(name, name) if aliases.get(name, name) in fields else None


def _invoke(app: typer.Typer, argv: list[str], out: dict[str, Any]) -> None:
    buf, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            app(args=argv, standalone_mode=False, prog_name="gpuplan")
        out["stdout"] = buf.getvalue()
    except BaseException as e:  # handed to the waiting request thread
        if getattr(e, "exit_code", None) == 0:  # typer.Exit(0): a normal end
            out["stdout"] = buf.getvalue()
        else:
            out["error"], out["stderr"] = e, err.getvalue()
    finally:
        _LOCK.release()


def _write_config(tmp: str, config: dict[str, Any]) -> str:
    raw = str(config.get("_name_or_path") or "uploaded")
    name = re.sub(r"[^A-Za-z0-9._-]", "-", raw.rstrip("/").rsplit("/", 1)[-1]).strip(".-")
    folder = Path(tmp) / (name[:64] or "uploaded")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(folder / "config.json")


def run_json(app: typer.Typer, command: str, params: list[Param], body: BaseModel,
             timeout_s: float) -> dict[str, Any]:
    """The command's JSON object for this request, or ApiError."""
    fields = {p.field for p in params} | {"config"}
    with tempfile.TemporaryDirectory(prefix="gpuplan-web-") as tmp:
        config = getattr(body, "config", None)
        argv = to_argv(command, params, body, _write_config(tmp, config) if config else None)
        if not _LOCK.acquire(timeout=timeout_s):
            raise ApiError(503, None, f"busy: another calculation is still running after "
                                      f"{timeout_s:g} s; try again")
        out: dict[str, Any] = {}
        worker = threading.Thread(target=_invoke, args=(app, argv, out), daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            _stop(worker)
            raise ApiError(503, None, f"{command}: took longer than the {timeout_s:g} s limit; "
                                      "ask for less (fewer GPUs to search, a smaller sweep)")
        e = out.get("error")
        if e is not None:
            raise _to_api_error(e, out.get("stderr", ""), fields, tmp) from None
    try:
        return json.loads(out["stdout"])  # type: ignore[no-any-return]
    except (KeyError, json.JSONDecodeError):
        raise ApiError(500, None, f"{command}: the command printed no JSON object") from None


def _to_api_error(e: BaseException, stderr: str, fields: set[str], tmp: str) -> ApiError:
    def clean(s: str) -> str:
        return " ".join(s.replace(tmp + "/", "").split())

    if isinstance(e, GpuplanError):
        return ApiError(422, _field_of(e, fields), clean(str(e)))
    if isinstance(e, typer.TyperException) and hasattr(e, "format_message"):
        return ApiError(422, _field_of(e, fields), clean(e.format_message()))
    if isinstance(e, (typer.Exit, SystemExit)):
        code = getattr(e, "exit_code", getattr(e, "code", 1))
        return ApiError(422 if code else 500, None, clean(stderr) or f"exit code {code}")
    if isinstance(e, Exception):
        return ApiError(500, None, f"internal error ({type(e).__name__}); please report it")
    raise e
