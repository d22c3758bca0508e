"""The `gpuplan` command: a thin layer that parses options, calls the core and renders.

Every command prints a readable table by default and one JSON object with `--json` (SI base
units, bytes as integers). User mistakes end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

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
    help="Will it fit, how fast, what does it cost: plan and measure neural-network work on GPUs.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # shows the option panels; joins wrapped docstring lines
    context_settings={"help_option_names": ["-h", "--help"]},
)


_registered = False


def get_app() -> typer.Typer:
    """The typer app with every command registered (once); the web API is built from it."""
    global _registered
    if not _registered:
        _register()
        _registered = True
    return app


def _register() -> None:
    import gpuplan.cli.profile_cmd as profile_cmd
    from gpuplan.cli import (
        bench_cmd,
        catalog_cmds,
        flops_cmd,
        memory_cmd,
        roofline_cmd,
        train_cmd,
        web_cmd,
    )

    catalog_cmds.register(app)
    flops_cmd.register(app)
    roofline_cmd.register(app)
    memory_cmd.register(app)
    train_cmd.register(app)
    bench_cmd.register(app)
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


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; turn user errors into one line and exit code 2."""
    get_app()
    try:
        rc = app(args=argv, standalone_mode=False)  # click returns typer.Exit's code here
    except GpuplanError as e:
        print(f"gpuplan: error: {e}", file=sys.stderr)
        return 2
    except _EXIT as e:
        return int(e.exit_code or 0)
    except _ABORT:
        print("gpuplan: aborted", file=sys.stderr)
        return 130
    except _USAGE as e:
        print(f"gpuplan: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
