"""Units: GB = 1e9, GiB = 2**30, decimal rates, exact decimal scaling, clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan import units
from gpuplan.errors import InputError


@pytest.mark.parametrize("text, kind, value", [
    ("80 GB", "bytes", 80_000_000_000),
    ("80GB", "bytes", 80_000_000_000),
    ("24 GiB", "bytes", 24 * 2**30),
    ("512 KiB", "bytes", 512 * 1024),
    ("1.5 MB", "bytes", 1_500_000),
    ("3 KB", "bytes", 3000),
    ("3 kB", "bytes", 3000),
    ("1,024 B", "bytes", 1024),
    ("3.35 TB/s", "bytes_per_s", 3.35e12),
    ("900 GB/s", "bytes_per_s", 9e11),
    ("989.4 TFLOP/s", "flops_per_s", 989.4e12),
    ("1979 TOPS", "flops_per_s", 1.979e15),
    ("66.9 TFLOPS", "flops_per_s", 66.9e12),
    ("3.2 PFLOP", "flops", 3.2e15),
    ("2 ms", "seconds", 2e-3),
    ("850 us", "seconds", 850e-6),
    ("3 h", "seconds", 10800.0),
    ("700 W", "watts", 700.0),
    ("$30,000", "usd", 30000.0),
    ("$2.49/h", "usd_per_hour", 2.49),
    ("1e9", "bytes", 1_000_000_000),
])
def test_parse(text, kind, value):
    assert units.parse(text, kind) == value


def test_decimal_scaling_is_exact():
    # 66.9 x 1e12 in binary floating point would be 66900000000000.01
    assert units.parse("66.9 TFLOP/s", "flops_per_s") == 66_900_000_000_000.0
    assert units.parse_bytes("0.1 GB") == 100_000_000


@pytest.mark.parametrize("text, kind", [
    ("80 GX", "bytes"), ("fast", "flops_per_s"), ("3 TB/s", "bytes"), ("80 GB", "seconds"),
    ("$5", "bytes"), ("inf", "bytes"), ("nan GB", "bytes"),
])
def test_bad_input_names_the_field(text, kind):
    with pytest.raises(InputError) as e:
        units.parse(text, kind, field="memory")
    assert "memory" in str(e.value) and repr(text) in str(e.value)


def test_format():
    assert units.format_bytes(80e9) == "80 GB"
    assert units.format_bytes(80e9, binary=True) == "74.5 GiB"
    assert units.format_bytes(2**30, binary=True) == "1 GiB"
    assert units.format_bandwidth(3.35e12) == "3.35 TB/s"
    assert units.format_flops_per_s(989.4e12) == "989 TFLOP/s"
    assert units.format_flops(6e23) == "600 ZFLOP"
    assert units.format_flops(3.8e25) == "38 YFLOP"
    assert units.format_seconds(0.0123) == "12.3 ms"
    assert units.format_seconds(5e-6) == "5 µs"
    assert units.format_seconds(3 * 86400) == "3 days"
    assert units.format_usd(1234567) == "$1,234,567"
    assert units.format_usd(2.5) == "$2.50"
    assert units.format_count(6.74e9) == "6.74B"


@given(st.integers(min_value=1, max_value=10**15))
def test_bytes_round_trip_decimal(n):
    # formatting to 3 significant digits and parsing back stays within 0.5%
    back = units.parse_bytes(units.format_bytes(n))
    assert back == pytest.approx(n, rel=5e-3)


@given(st.integers(min_value=1, max_value=10**15))
def test_bytes_round_trip_binary(n):
    back = units.parse_bytes(units.format_bytes(n, binary=True))
    assert back == pytest.approx(n, rel=5e-3)
