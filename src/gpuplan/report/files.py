"""Output files (`--plot`, `--html`): the path checked before any work, the file written
atomically (a temporary file in the same folder, then a rename), so a failure leaves nothing
half-written and an existing file untouched."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpuplan.errors import GpuplanError, shorten

PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")
HTML_SUFFIXES = (".html", ".htm")


def output_path(option: str, path: Path | str, suffixes: tuple[str, ...]) -> Path:
    """Refuse an empty name, an unknown extension, a missing or read-only folder, a folder or a
    special file (/dev/full) as the target."""
    text = str(path)
    p = Path(text)
    if not text.strip() or p.name in ("", ".", ".."):
        raise GpuplanError(f"{option}: empty file name; expected a file such as "
                           f"chart{suffixes[0]}")
    if p.suffix.lower() not in suffixes:
        raise GpuplanError(f"{option}: {shorten(text)} has an unknown extension; expected "
                           f"{', '.join(suffixes)}")
    parent = p.parent
    try:
        if not parent.is_dir():
            raise GpuplanError(f"{option}: folder {shorten(str(parent))} does not exist")
        if p.exists() and not stat.S_ISREG(p.stat().st_mode):
            raise GpuplanError(f"{option}: {shorten(text)} exists and is not a regular file")
    except (OSError, ValueError) as e:
        raise GpuplanError(f"{option}: {shorten(text)} is not a usable path "
                           f"({getattr(e, 'strerror', None) or e})") from None
    if not os.access(parent, os.W_OK):
        raise GpuplanError(f"{option}: folder {shorten(str(parent))} is not writable")
    return p


def write_atomic(option: str, path: Path, write: Callable[[Path], None]) -> Path:
    """write(tmp) into a temporary file next to `path` (same extension), then rename it."""
    tmp: Path | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix,
                                        dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise GpuplanError(f"{option}: cannot write {shorten(str(path))} "
                           f"({e.strerror or e})") from None
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()
    return path
