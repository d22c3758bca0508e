"""The `gpuplan` command: a thin layer that parses options, calls the core and renders.

Every command prints a readable table by default and one JSON object with `--json` (SI base
units, bytes as integers). User mistakes end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

from gpuplan.errors import GpuplanError

try:  # typer >= 0.26 vendors its own copy of click (and no longer installs click)
    from typer._click import exceptions as _click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as _click_exceptions  # type: ignore[no-redef]

_EXIT = (typer.Exit, _click_exceptions.Exit) if hasattr(_click_exceptions, "Exit") \
    else (typer.Exit,)
_ABORT = (typer.Abort, _click_exceptions.Abort) if hasattr(_click_exceptions, "Abort") \
    else (typer.Abort,)
_USAGE = (_click_exceptions.ClickException,)

app = typer.Typer(
    name="gpuplan",
    help="Will it fit, how fast, what does it cost: plan and measure neural-network work on GPUs."
         " Add --debug (or set GPUPLAN_DEBUG=1) to see the traceback of an error.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # shows the option panels; joins wrapped docstring lines
    context_settings={"help_option_names": ["-h", "--help"]},
)


_REGISTERED: list[bool] = []


def get_app() -> typer.Typer:
    """The typer app with every command registered (once); the web API is built from it."""
    _register()
    return app


def _register() -> None:
    """Add the commands once (main() may be called many times in one process)."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    import gpuplan.cli.profile_cmd as profile_cmd
    from gpuplan.cli import (
        advise_cmd,
        bench_cmd,
        catalog_cmds,
        cost_cmd,
        flops_cmd,
        memory_cmd,
        plan_cmd,
        roofline_cmd,
        serve_cmd,
        train_cmd,
        web_cmd,
    )

    plan_cmd.register(app)
    catalog_cmds.register(app)
    flops_cmd.register(app)
    roofline_cmd.register(app)
    memory_cmd.register(app)
    train_cmd.register(app)
    bench_cmd.register(app)
    cost_cmd.register(app)
    advise_cmd.register(app)
    serve_cmd.register(app)
    profile_cmd.register(app)
    web_cmd.register(app)


def _one_line(e: Exception) -> str:
    """Usage errors name the option and what is valid."""
    param = getattr(e, "param", None)
    msg = " ".join(e.format_message().split())  # type: ignore[attr-defined]
    if param is not None:
        opts = list(getattr(param, "opts", []) or [str(getattr(param, "name", ""))])
        if opts and not any(o in msg for o in opts):
            msg = f"{'/'.join(opts)}: {msg}"
    return msg


def _clean(text: str, word_limit: int = 100) -> str:
    """One printable line; words longer than word_limit (an echoed 5 MB value) are cut."""
    words = []
    for w in text.split():
        if len(w) > word_limit:
            w = f"{w[:word_limit - 20]}...({len(w):,} chars)"
        words.append("".join(c if c.isprintable() else repr(c)[1:-1] for c in w))
    return " ".join(words)


def _as_option(e: GpuplanError, args: list[str]) -> str:
    """An estimator's error names its Python field ('tp', 'usd_per_gpu_hour'); on the command
    line it is shown as the option the user typed (--tp, --usd-per-gpu-hour)."""
    from gpuplan.errors import InputError

    text, field = str(e), getattr(e, "field", None)
    if not isinstance(e, InputError) or not isinstance(field, str) \
            or not field.isidentifier() or not text.startswith(f"{field}:"):
        return text
    try:
        from typer.main import get_command

        cmd = get_command(app).commands.get(_command(args))  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover - the message as the estimator wrote it
        return text
    param = next((p for p in getattr(cmd, "params", []) if p.name == field), None)
    flags = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return f"{flags[0]}{text[len(field):]}" if flags else text


def _fail(msg: str, code: int = 2) -> int:
    print(f"gpuplan: {_clean(msg)}", file=sys.stderr)
    return code


INPUT_CAUSED = (OverflowError, RecursionError, UnicodeError, MemoryError, OSError)
"""Exceptions an input causes (a huge number, deep nesting, bad bytes, an unreadable path);
the validators should catch these first: this is the last resort."""


def _command(argv: list[str]) -> str:
    return next((a for a in argv if not a.startswith("-")), "gpuplan")


def _split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """--debug anywhere before `--` (what follows `--` belongs to a profiled script)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    head = [a for a in argv[:cut] if a != "--debug"]
    debug = len(head) < cut or os.environ.get("GPUPLAN_DEBUG", "") not in ("", "0")
    return head + argv[cut:], debug


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; user errors become one line on stderr and exit code 2; an
    unexpected failure is one line too (exit 1), with the traceback under --debug."""
    get_app()
    args, debug = _split_debug(list(sys.argv[1:] if argv is None else argv))
    try:
        rc = app(args=args, standalone_mode=False)  # click returns typer.Exit's code here
    except GpuplanError as e:
        if debug:
            traceback.print_exc()
        return _fail(f"error: {_as_option(e, args)}")
    except _EXIT as e:
        return int(e.exit_code or 0)
    except (*_ABORT, KeyboardInterrupt):
        return _fail("aborted", 130)
    except _USAGE as e:
        return _fail(f"error: {_one_line(e)}")
    except BrokenPipeError:
        return 0
    except INPUT_CAUSED as e:
        if debug:
            traceback.print_exc()
        where = f" ({e.filename})" if isinstance(e, OSError) and e.filename else ""
        return _fail(f"error: {_command(args)}: an input could not be handled: "
                     f"{type(e).__name__}{where}: {e} (a value too large, nested too deeply, "
                     "not UTF-8, or a path that cannot be used)")
    except Exception as e:
        if debug:
            traceback.print_exc()
        return _fail(f"internal error in `{_command(args)}`: {type(e).__name__}: {e}. This is "
                     "a bug: please report it with the command line (rerun with --debug or "
                     "GPUPLAN_DEBUG=1 for the traceback)", 1)
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
