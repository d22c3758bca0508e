"""Reading user files safely: UTF-8 text with a size cap, JSON depth-limited and strict.

Every loader (config.json, device and model TOML files, machine profiles) reads through here,
so a binary file, a FIFO, a 5 GB file, a deeply nested or NaN-laden JSON document is one clear
error naming the file, never a traceback, a hang or a memory blow-up.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from gpuplan.errors import GpuplanError, shorten

MAX_FILE_BYTES = 16 * 2**20
"""16 MiB: a config.json is a few KB, a device file ~3 KB, a machine profile < 1 MB"""
MAX_JSON_DEPTH = 64
"""nesting levels; real config.json files use <= 4"""
MAX_INT_DIGITS = 30
"""digits of a JSON integer (2**64 has 20); longer ones are refused, not converted"""


def shown(path: Path | str) -> str:
    """A path as echoed in a message (shortened)."""
    return shorten(str(path))


def user_path(text: str | Path) -> Path:
    """A path the user typed, with ~ expanded (an unknown ~user stays as written)."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~nosuchuser
        return Path(text)


def exists(path: Path) -> bool:
    """Path.exists that answers False for names the OS refuses (too long, NUL bytes)."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def read_text(path: Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text; refuses what is not a regular file (FIFOs, devices: no hang), is larger
    than max_bytes, or is not UTF-8."""
    where = f"{what}: {shown(path)}"
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise GpuplanError(f"{where} is not a regular file")
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise GpuplanError(f"{where}: cannot read (the file does not exist)") from None
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise GpuplanError(f"{where}: cannot read ({reason})") from None
    if len(data) > max_bytes:
        raise GpuplanError(f"{where} is larger than {max_bytes // 2**20} MiB; not a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GpuplanError(f"{where} is not UTF-8 text (byte {e.start}: binary file?)") from None


def json_depth(text: str) -> int:
    """Deepest nesting of [ and { outside strings (a linear scan, no recursion)."""
    if text.count("[") + text.count("{") <= 1:
        return text.count("[") + text.count("{")
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (write a finite number)")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def parse_json(text: str, origin: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: depth <= max_depth, no NaN/Infinity, integers of at most 30 digits."""
    if text.count("[") + text.count("{") > max_depth and json_depth(text) > max_depth:
        raise GpuplanError(f"{origin}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as e:
        raise GpuplanError(f"{origin}: not valid JSON ({e.msg} at line {e.lineno} column "
                           f"{e.colno})") from None
    except (ValueError, RecursionError) as e:
        raise GpuplanError(f"{origin}: not valid JSON ({shorten(str(e), 120)})") from None


def load_json(path: Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> Any:
    return parse_json(read_text(path, what, max_bytes), f"{what}: {shown(path)}")


def parse_toml(text: str, origin: str) -> dict[str, Any]:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as e:
        raise GpuplanError(f"{origin}: not valid TOML ({shorten(str(e), 120)})") from None
    except (RecursionError, ValueError, OverflowError):
        raise GpuplanError(f"{origin}: not valid TOML (nested too deeply or a number out of "
                           "range)") from None
