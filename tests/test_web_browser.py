"""The page in a real browser: Debian's Chromium driven by Playwright, against a real
`gpuplan web` server on a free loopback port. Skips only when Chromium (or Playwright) is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip("Chromium is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}
LLAMA_CONFIG = {"_name_or_path": "tiny-llama", "model_type": "llama", "hidden_size": 512,
                "intermediate_size": 1376, "num_hidden_layers": 4, "num_attention_heads": 8,
                "num_key_value_heads": 4, "vocab_size": 32000,
                "max_position_embeddings": 2048, "hidden_act": "silu"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan.cli.main", "web", "--port",
                             str(port)], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/api/commands", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError as e:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.stdout.read()  # type: ignore[union-attr]
                raise RuntimeError(f"gpuplan web did not start: {out!r}") from e
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def api(url: str, command: str, body: dict) -> dict:
    req = urllib.request.Request(f"{url}/api/{command}", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def api_commands(url: str) -> set[str]:
    with urllib.request.urlopen(f"{url}/api/commands", timeout=30) as r:
        return set(json.loads(r.read())["commands"])


def cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *args, "--json"], env=ENV,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def shown_bytes(page: object, expected: int) -> int:
    """Wait until the page shows `expected` (it updates after each change), then read it."""
    page.wait_for_function(  # type: ignore[attr-defined]
        "e => document.querySelector('[data-testid=memory-total]').dataset.bytes === e",
        arg=str(expected), timeout=30_000)
    return int(page.get_attribute("[data-testid=memory-total]", "data-bytes"))  # type: ignore[attr-defined]


def test_page_shows_the_api_and_cli_totals(server: str, browser: object,
                                           tmp_path: Path) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 1500})  # type: ignore[attr-defined]
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + "/")
    page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=60_000)
    models = page.eval_on_selector_all("[data-testid=model] option", "os => os.map(o => o.value)")
    gpus = page.eval_on_selector_all("[data-testid=gpu] option", "os => os.map(o => o.value)")
    assert models == [m["name"] for m in cli("models")["models"]]
    assert gpus == [d["name"] for d in cli("hardware")["devices"]]

    # training: choose a model and a device, change the sizes
    page.select_option("[data-testid=model]", "llama-2-7b")
    page.select_option("[data-testid=gpu]", "A100-SXM-80GB")
    page.select_option("[data-testid=mode]", "train")
    page.fill("[data-testid=micro-batch]", "2")
    page.fill("[data-testid=seq-len]", "4096")
    page.fill("[data-testid=gpus]", "8")
    page.select_option("[data-testid=zero]", "3")
    body = {"model": "llama-2-7b", "gpu": "A100-SXM-80GB", "mode": "train", "micro_batch": 2,
            "seq_len": 4096, "zero": 3, "dp": 8, "tp": 1, "precision": "bf16-mixed",
            "recompute": "none"}
    want = api(server, "memory", body)["total_bytes"]
    assert want == cli("memory", "llama-2-7b", "--gpu", "A100-SXM-80GB", "--mode", "train",
                       "--micro-batch", "2", "--seq-len", "4096", "--zero", "3",
                       "--dp", "8")["total_bytes"]
    assert shown_bytes(page, want) == want
    assert page.locator("#chart-memory [data-testid=chart-memory]").is_visible()
    assert page.locator("[data-testid=chart-roofline]").is_visible()
    assert page.locator("[data-testid=chart-scaling]").count() == 1
    page.screenshot(path=str(tmp_path / "web-train.png"), full_page=True)

    # inference: batch and context
    page.select_option("[data-testid=mode]", "infer")
    page.fill("[data-testid=batch]", "8")
    page.fill("[data-testid=context]", "8192")
    want = api(server, "memory", {"model": "llama-2-7b", "gpu": "A100-SXM-80GB",
                                  "mode": "infer", "batch": 8, "context": 8192})["total_bytes"]
    assert want == cli("memory", "llama-2-7b", "--gpu", "A100-SXM-80GB", "--mode", "infer",
                       "--batch", "8", "--context", "8192")["total_bytes"]
    assert shown_bytes(page, want) == want
    assert not page.locator("[data-testid=micro-batch]").is_visible()
    served = api_commands(server)
    for box in ("serve", "cost"):  # a chart whose endpoint is absent is hidden
        assert page.locator(f"#chart-{box}").is_visible() == (box in served)
    page.screenshot(path=str(tmp_path / "web-infer.png"), full_page=True)
    print(f"screenshots in {tmp_path}")

    # the report to send to a colleague: one file, the page's total in it
    with page.expect_download() as dl:
        page.click("[data-testid=download]")
    saved = tmp_path / "report.html"
    dl.value.save_as(saved)
    text = saved.read_text()
    assert f'&quot;total_bytes&quot;: {want},' in text and "<svg" in text

    # a bad value shows the API's one-line error, naming the field
    page.fill("[data-testid=batch]", "-1")
    page.wait_for_selector("[data-testid=error]:not([hidden])", timeout=30_000)
    assert "batch" in page.text_content("[data-testid=error]")
    assert not errors
    shot = os.environ.get("GPUPLAN_SCREENSHOT")  # docs/web-page.png is made this way
    if shot:
        page.fill("[data-testid=batch]", "8")
        page.select_option("[data-testid=mode]", "train")
        page.select_option("[data-testid=model]", "llama-3.2-3b")
        page.select_option("[data-testid=zero]", "1")
        small = {**body, "model": "llama-3.2-3b", "zero": 1}
        shown_bytes(page, api(server, "memory", small)["total_bytes"])
        page.wait_for_selector("[data-testid=status][data-state=ready]")
        page.screenshot(path=shot, full_page=True)
    assert all(u.startswith(server) or u.startswith("data:") for u in requests), requests


def test_uploaded_config_json(server: str, browser: object, tmp_path: Path) -> None:
    cfg = tmp_path / "tiny-llama" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(LLAMA_CONFIG))
    page = browser.new_page()  # type: ignore[attr-defined]
    page.goto(server + "/")
    page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=60_000)
    page.select_option("[data-testid=gpu]", "L4")
    page.set_input_files("[data-testid=config-upload]", str(cfg))
    want = cli("memory", str(cfg), "--gpu", "L4", "--micro-batch", "1", "--seq-len", "2048",
               "--zero", "1", "--dp", "8")["total_bytes"]
    assert shown_bytes(page, want) == want
    assert "tiny-llama" in page.text_content("[data-testid=chart-memory-box]")


def test_html_report_opens_offline_with_a_chart(browser: object, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "roofline", "llama-3-8b", "--gpu",
                    "h100", "--html", str(out)], env=ENV, check=True, capture_output=True)
    ctx = browser.new_context(offline=True)  # type: ignore[attr-defined]
    page = ctx.new_page()
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url))
    page.goto(out.as_uri())
    assert fetched == [out.as_uri()]  # the file itself and nothing else
    chart = page.locator("svg[data-testid=chart-roofline]")
    assert chart.is_visible() and chart.bounding_box()["width"] > 300
    assert page.locator("circle").count() > 5  # the model's ops on the roofline
    assert "Assumptions" in page.text_content("body")
    ctx.close()


def test_a_new_endpoint_shows_its_box(browser: object) -> None:
    """A `cost` command registered later appears on the page with its contract keys."""
    import threading

    import typer
    import uvicorn

    from gpuplan.cli import catalog_cmds, memory_cmd, roofline_cmd, train_cmd
    from gpuplan.web.app import create_app

    cli_app = typer.Typer()
    for mod in (catalog_cmds, memory_cmd, roofline_cmd, train_cmd):
        mod.register(cli_app)

    @cli_app.command()
    def cost(gpu: str, gpus: int = typer.Option(1, "--gpus", min=1),
             as_json: bool = typer.Option(False, "--json")) -> None:
        print(json.dumps({"gpu": gpu, "buy": {"total_usd": 1000.0 * gpus},
                          "rent": {"total_usd": 1500.0 * gpus}, "break_even_utilization": 0.4}))

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(cli=cli_app), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=60_000)
        page.fill("[data-testid=gpus]", "4")
        page.wait_for_function("() => document.querySelector('[data-testid=buy-total-usd]')"
                               "?.dataset.value === '4000'", timeout=30_000)
        assert page.locator("#chart-cost").is_visible()
        assert not page.locator("#chart-serve").is_visible()
    finally:
        server.should_exit = True
        thread.join(10)
