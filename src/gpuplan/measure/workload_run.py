"""Run an unmodified training script under a WorkloadSession, as `python SCRIPT ARGS` would:
`sys.argv` is [SCRIPT, *ARGS], the script's folder is first on `sys.path`, the working
directory is unchanged and the script runs as `__main__`. Its own errors are its own: the
outcome carries the script's traceback with gpuplan's frames removed."""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

from gpuplan.errors import GpuplanError
from gpuplan.measure.workload import StopProfiling, WorkloadSession


class ScriptTimeout(BaseException):
    """--timeout passed."""


@dataclass
class Outcome:
    status: str
    """'done' (all steps measured), 'ended' (the script returned or exited first), 'raised',
    'timeout'"""
    message: str = ""
    traceback: str = ""
    exit_code: int | None = None


def _user_traceback(exc: BaseException) -> str:
    """The script's traceback from its own frames on (runpy and gpuplan frames dropped)."""
    tb: TracebackType | None = exc.__traceback__
    here = str(Path(__file__).resolve().parents[1])
    while tb is not None and (tb.tb_frame.f_code.co_filename.startswith(here)
                              or "runpy" in tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


@contextlib.contextmanager
def _as_main(script: Path, args: list[str]) -> Iterator[None]:
    argv, path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        yield
    finally:
        sys.argv[:], sys.path[:] = argv, path


@contextlib.contextmanager
def _alarm(timeout_s: float | None) -> Iterator[None]:
    if not timeout_s:
        yield
        return

    def fire(signum: int, frame: FrameType | None) -> None:
        raise ScriptTimeout

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def check_script(script: str) -> Path:
    from gpuplan.specs.files import is_file, shown

    p = Path(script)
    if not is_file(p):
        raise GpuplanError(f"SCRIPT: {shown(script)} is not a file; expected a Python training "
                           "script")
    if not os.access(p, os.R_OK):
        raise GpuplanError(f"SCRIPT: {shown(script)} is not readable")
    _check_source(p, shown(script))
    return p


def _check_source(p: Path, name: str) -> None:
    """Compile the script before running it: binary data or a syntax error is the user's
    input at fault (one line, exit 2), not a failed measurement."""
    from gpuplan.specs.files import MAX_FILE_BYTES

    if p.stat().st_size > MAX_FILE_BYTES:
        raise GpuplanError(f"SCRIPT: {name} is larger than {MAX_FILE_BYTES // 2**20} MiB; "
                           "expected a Python training script")
    try:
        compile(p.read_bytes(), str(p), "exec", dont_inherit=True)
    except SyntaxError as e:
        at = f", line {e.lineno}" if e.lineno else ""
        raise GpuplanError(f"SCRIPT: {name} is not valid Python ({e.msg}{at}); expected a "
                           "Python training script") from None
    except (ValueError, UnicodeError, OSError) as e:
        raise GpuplanError(f"SCRIPT: {name} is not a Python script ({e}); expected a Python "
                           "training script") from None


def run_script(script: Path, args: list[str], session: WorkloadSession,
               timeout_s: float | None = None) -> Outcome:
    """Run the script until the session has measured its steps, the script ends, raises or
    times out. Data loader workers are shut down in every case."""
    try:
        with _as_main(script, args), _alarm(timeout_s), session:
            runpy.run_path(str(script), run_name="__main__")
        return Outcome("ended", "the script returned")
    except StopProfiling:
        return Outcome("done")
    except ScriptTimeout:
        return Outcome("timeout", f"the script ran past --timeout {timeout_s:g} s "
                                  f"after {session.raw.steps_seen} optimizer steps")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return Outcome("ended", f"the script exited with code {code}", exit_code=code)
    except KeyboardInterrupt:
        return Outcome("raised", "interrupted (Ctrl-C)")
    except BaseException as e:  # the user's script raised: report it as theirs
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        return Outcome("raised", f"the script raised {type(e).__name__}{at}",
                       traceback=_user_traceback(e))
    finally:
        session.shutdown_loaders()
