"""HTML reports and their SVG charts: self-contained, atomic, exact geometry, escaped text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.report import svg
from gpuplan.report.charts import charts_for, memory_parts
from gpuplan.report.html import format_value, render_report, write_report

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *args], env=ENV,
                          capture_output=True, text=True)


def test_stacked_bar_widths_are_proportional() -> None:
    s = svg.stacked_bar([("a", 1.0), ("b", 3.0)], 8.0, "t", str)
    # plot width W - 20 = 620 px spans the larger of total (4) and limit (8): 620/8 per unit
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="30.0" width="([\d.]+)"', s)]
    assert widths == [77.5, 232.5]
    assert 'x1="630.0"' in s  # the limit line at the right end


def test_chart_text_is_escaped() -> None:
    s = svg.hbars([("<script>alert(1)</script>", 1.0)], "a & b", str)
    assert "<script>" not in s and "&lt;script&gt;" in s and "a &amp; b" in s


def test_memory_chart_parts_sum_to_the_total() -> None:
    r = json.loads(run("memory", "llama-3-8b", "--json").stdout)
    assert sum(v for _, v in memory_parts(r)) == r["total_bytes"]
    (title, chart), = charts_for("memory", r)
    assert "llama-3-8b" in title and chart.startswith("<svg")


def test_format_value_uses_the_key_unit() -> None:
    assert format_value("total_bytes", 2_000_000_000).startswith("2 GB")
    assert format_value("step_time_s", 0.25).startswith("250 ms")
    assert format_value("cost_usd", 12.5) == "$12.50"
    assert format_value("fits", True) == "True"


def test_report_is_self_contained() -> None:
    r = json.loads(run("train", "gpt2", "--gpu", "a100", "--scaling", "--json").stdout)
    html = render_report("train", r, {"model": "gpt2", "gpus": 8})
    assert html.count("<svg") >= 3  # step breakdown, scaling, memory
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    # nothing to fetch: no src/href attributes, no url(), no @import; only the SVG namespace
    assert not re.search(r"\b(src|href)\s*=", html)
    assert "url(" not in html and "@import" not in html
    assert set(re.findall(r"https?://[^\s\"'<]+", html)) <= {"http://www.w3.org/2000/svg"}
    for part in ("Inputs", "Numbers", "Assumptions", "Charts", "step_time_s"):
        assert part in html


def test_write_is_atomic_and_bad_paths_are_one_error(tmp_path: Path) -> None:
    out = write_report(tmp_path / "r.html", "flops", {"params": 1})
    assert out.read_text().startswith("<!doctype html>")
    assert os.listdir(tmp_path) == ["r.html"]  # no temporary file left behind
    with pytest.raises(GpuplanError, match="does not exist"):
        write_report(tmp_path / "missing" / "r.html", "flops", {"params": 1})
    with pytest.raises(GpuplanError, match="folder"):
        write_report(tmp_path, "flops", {"params": 1})
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):  # root ignores permissions
            pytest.skip("running as root: cannot make a folder unwritable")
        with pytest.raises(GpuplanError, match="cannot write"):
            write_report(tmp_path / "other.html", "flops", {"params": 1})
        assert os.listdir(tmp_path) == ["r.html"]
    finally:
        os.chmod(tmp_path, 0o700)


@pytest.mark.parametrize("cmd", [
    ["memory", "gpt2", "--fix", "--gpu", "t4", "--micro-batch", "16"],
    ["roofline", "gpt2", "--phase", "decode"],
    ["train", "gpt2", "--gpu", "a100", "--scaling"],
])
def test_cli_html_flag_writes_a_report_and_keeps_json(cmd: list[str], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    p = run(*cmd, "--html", str(out), "--json")
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)  # stdout is still exactly one JSON object
    html = out.read_text()
    assert "<svg" in html and f"gpuplan {cmd[0]}" in html


def test_cli_html_bad_path_is_one_line_exit_2_before_any_work(tmp_path: Path) -> None:
    for bad in (str(tmp_path / "no" / "such" / "r.html"), str(tmp_path)):
        p = run("train", "gpt2", "--html", bad)
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.count("\n") == 1 and "--html" in p.stderr
