"""Units: parse and format bytes, FLOPs, FLOP/s, bandwidth, seconds, watts and dollars.

Everything inside gpuplan is a plain SI base quantity (bytes, FLOPs, seconds, FLOP/s, bytes/s,
watts, US dollars). Conversion happens only here, at the edges.

Conventions (stated once, tested): decimal prefixes are powers of 1000 (GB = 1e9 bytes), binary
prefixes powers of 1024 (GiB = 2**30 bytes); FLOPs count a multiply-add as 2 FLOPs; "TB/s" and
"TFLOP/s" are decimal, as every datasheet uses them.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Literal

from gpuplan.errors import InputError

Kind = Literal["bytes", "bytes_per_s", "flops", "flops_per_s", "seconds", "watts", "usd", "usd_per_hour"]

DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Z": 1e21, "Y": 1e24}
BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

# unit word (after the prefix) -> kind
_UNIT_WORDS: dict[str, Kind] = {
    "B": "bytes",
    "B/s": "bytes_per_s",
    "FLOP": "flops",
    "FLOPs": "flops",
    "FLOP/s": "flops_per_s",
    "FLOPS": "flops_per_s",
    "OP/s": "flops_per_s",
    "OPS": "flops_per_s",
    "W": "watts",
}
_SECONDS = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
            "min": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0}

_NUMBER = r"[-+]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_QUANTITY = re.compile(rf"^\s*(\$)?\s*({_NUMBER})\s*([A-Za-zµ/$]*(?:/[A-Za-z]+)?)\s*$")

DTYPE_BYTES: dict[str, float] = {
    "fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5,
    "int4": 0.5,
}
"""Bytes per element of each dtype (IEEE 754 widths; tf32 is stored in 32 bits; fp8 E4M3/E5M2
and int8 one byte; fp4 (E2M1) and int4 half a byte, packed two per byte)"""


def _number(text: str) -> Decimal:
    try:
        return Decimal(text.replace(",", "").replace("_", ""))
    except InvalidOperation:
        return Decimal("nan")


def parse(text: str | float | int, kind: Kind, field: str = "value") -> float:
    """Parse a quantity such as "80 GB", "3.35 TB/s", "989 TFLOP/s", "2 ms", "$2.49/h".

    A bare number is taken to be in base units already. Raises InputError naming `field`.
    """
    if isinstance(text, bool):
        raise InputError(field, text, f"a {kind} quantity")
    value = float(text) if isinstance(text, (int, float)) else _parse_text(text, kind, field)
    if not math.isfinite(value):
        raise InputError(field, text, f"a finite {kind} quantity")
    return value


def _parse_text(text: str, kind: Kind, field: str) -> float:
    m = _QUANTITY.match(text)
    if not m:
        raise InputError(field, text, f"a {kind} quantity like {_EXAMPLES[kind]}")
    dollar, unit = m.group(1), m.group(3)
    num = float(_number(m.group(2)))
    exact = _number(m.group(2))
    if kind in ("usd", "usd_per_hour"):
        unit = unit.replace("USD", "").replace("$", "")
        if kind == "usd" and unit == "":
            return num
        if kind == "usd_per_hour" and unit in ("/h", "/hr", "/hour", "h", ""):
            return num
        raise InputError(field, text, f"a {kind} quantity like {_EXAMPLES[kind]}")
    if dollar:
        raise InputError(field, text, f"a {kind} quantity like {_EXAMPLES[kind]}")
    if kind == "seconds":
        if unit == "":
            return num
        if unit in _SECONDS:
            return num * _SECONDS[unit]
        raise InputError(field, text, f"a time like {_EXAMPLES[kind]}")
    if unit == "":
        return num
    for prefixes in (BINARY, DECIMAL):
        for prefix, scale in prefixes.items():
            if unit.startswith(prefix) and _UNIT_WORDS.get(unit[len(prefix):]) == kind:
                return float(exact * Decimal(scale))  # exact decimal scaling: 66.9 T -> 6.69e13
    raise InputError(field, text, f"a {kind} quantity like {_EXAMPLES[kind]}")


_EXAMPLES: dict[Kind, str] = {
    "bytes": "'80 GB', '24 GiB' or '512 MB'",
    "bytes_per_s": "'3.35 TB/s' or '900 GB/s'",
    "flops": "'1.2 PFLOP' or '3e21'",
    "flops_per_s": "'989 TFLOP/s'",
    "seconds": "'2 ms', '1.5 s' or '3 h'",
    "watts": "'700 W'",
    "usd": "'$30000' or '2.49'",
    "usd_per_hour": "'$2.49/h'",
}


def parse_bytes(text: str | float | int, field: str = "bytes") -> int:
    """Bytes as an integer: '80 GB' -> 80_000_000_000, '1 GiB' -> 1_073_741_824."""
    return round(parse(text, "bytes", field))


def _sig(x: float, digits: int) -> str:
    """`digits` significant digits, never in exponent notation."""
    if abs(x) >= 10**digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _scaled(value: float, prefixes: list[tuple[str, float]], digits: int) -> tuple[str, str]:
    for prefix, scale in prefixes:
        if abs(value) >= scale:
            return _sig(value / scale, digits), prefix
    return _sig(value, digits), ""


_DEC = [("Y", 1e24), ("Z", 1e21), ("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9),
        ("M", 1e6), ("k", 1e3)]
_BIN = [("Pi", 2.0**50), ("Ti", 2.0**40), ("Gi", 2.0**30), ("Mi", 2.0**20), ("Ki", 2.0**10)]


def format_bytes(n: float, binary: bool = False, digits: int = 3) -> str:
    """'80 GB' (decimal, default) or '74.5 GiB' (binary=True)."""
    num, prefix = _scaled(float(n), _BIN if binary else _DEC, digits)
    if prefix == "k":
        prefix = "K"
    return f"{num} {prefix}B"


def format_bandwidth(bytes_per_s: float, digits: int = 3) -> str:
    num, prefix = _scaled(bytes_per_s, _DEC, digits)
    return f"{num} {prefix.upper() if prefix == 'k' else prefix}B/s"


def format_flops(n: float, digits: int = 3) -> str:
    num, prefix = _scaled(n, _DEC, digits)
    return f"{num} {prefix}FLOP"


def format_flops_per_s(n: float, digits: int = 3) -> str:
    num, prefix = _scaled(n, _DEC, digits)
    return f"{num} {prefix}FLOP/s"


def format_seconds(s: float, digits: int = 3) -> str:
    """Human time: '850 µs', '12.3 ms', '4.2 s', '3.5 h', '12.1 days'."""
    a = abs(s)
    if a == 0:
        return "0 s"
    for limit, scale, unit in ((1e-6, 1e-9, "ns"), (1e-3, 1e-6, "µs"), (1.0, 1e-3, "ms"),
                               (120.0, 1.0, "s"), (7200.0, 60.0, "min"), (172800.0, 3600.0, "h")):
        if a < limit:
            return f"{_sig(s / scale, digits)} {unit}"
    return f"{_sig(s / 86400.0, digits)} days"


def format_usd(x: float) -> str:
    """'$1,234' for large sums, '$2.49' for small ones."""
    if abs(x) >= 100:
        return f"${x:,.0f}"
    return f"${x:,.2f}"


def format_count(n: float) -> str:
    """Parameter and token counts: '6.74B', '124M', '8.0k'."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{_sig(n / scale, 3)}{suffix}"
    return _sig(n, 3)
