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
        super().__init__(f"{field}: {value!r} is not valid; expected {valid}")


class UnknownNameError(InputError):
    """A name (device, model, dtype...) that is not in the catalog."""

    def __init__(self, field: str, value: str, known: list[str]) -> None:
        shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        super().__init__(field, value, f"one of: {shown}")
