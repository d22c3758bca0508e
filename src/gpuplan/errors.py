"""User-facing errors: one clear line naming the field, the value and what is valid."""

from __future__ import annotations


class GpuplanError(Exception):
    """An error caused by user input or user data; the CLI prints it as one line, exit code 2."""


class InputError(GpuplanError, ValueError):
    """A field holds a value that is not valid.

    The message always names the field, the offending value and what would be valid.
    """

    def __init__(self, field: str, value: object, valid: str) -> None:
        self.field = field
        self.value = value
        self.valid = valid
        super().__init__(f"{field}: {shorten(value)} is not valid; expected {valid}")


class UnknownNameError(InputError):
    """A name (device, model, dtype...) that is not in the catalog."""

    def __init__(self, field: str, value: str, known: list[str]) -> None:
        shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        close = did_you_mean(value, known)
        super().__init__(field, value, (f"{close} (did you mean it?) or " if close else "")
                         + f"one of: {shown}")


MAX_ECHO = 80
"""Characters of a user's value echoed in an error message (a 5 MB value is shown cut)."""


def shorten(value: object, limit: int = MAX_ECHO) -> str:
    """repr(value) cut to `limit` characters, saying how long it was."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, (str, bytes, list, dict, tuple)) else len(text)
    return f"{text[:limit - 20]}... ({size:,} chars)"


def did_you_mean(value: object, known: list[str]) -> str | None:
    """The known name closest to `value` (difflib ratio >= 0.6, case-insensitive), if any."""
    import difflib

    if not isinstance(value, str) or not known or len(value) > 200:
        return None
    lower = {k.lower(): k for k in known}
    hits = difflib.get_close_matches(value.lower(), list(lower), n=1, cutoff=0.6)
    return lower[hits[0]] if hits else None
