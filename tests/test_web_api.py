"""The web API (FastAPI's TestClient, in-process): generated from the CLI, exactly the CLI's
JSON, and a 4xx JSON error naming the field for every bad payload tried."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer.main

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.cli.main import get_app
from gpuplan.web.app import NOT_SERVED, create_app
from gpuplan.web.commands import api_params, command_params, registered_commands

SRC = Path(__file__).resolve().parents[1] / "src"
LLAMA_CONFIG = {  # a small Llama-architecture config.json (HF LlamaConfig field names)
    "_name_or_path": "tiny-llama", "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 1376, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048,
    "hidden_act": "silu", "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def cli_json(*args: str) -> dict:
    """The CLI's --json object from a real process (the user's path, not the API's)."""
    out = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *args, "--json"],
                         capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)


def test_every_registered_command_but_the_unsafe_ones_has_an_endpoint(client: TestClient) -> None:
    registered = set(registered_commands(get_app()))
    served = set(client.get("/api/commands").json()["commands"])
    assert served == registered - NOT_SERVED
    assert {"memory", "roofline", "train"} <= served
    paths = client.get("/openapi.json").json()["paths"]
    assert {f"/api/{n}" for n in served} <= set(paths)


def test_field_names_are_the_cli_long_options_in_snake_case() -> None:
    fns = registered_commands(get_app())
    train = {p.name: p.field for p in command_params(fns["train"])}
    assert train["usd_per_hour"] == "usd_per_gpu_hour"  # --usd-per-gpu-hour
    assert train["micro_batch"] == "micro_batch" and train["model"] == "model"
    memory = {p.field for p in api_params(fns["memory"])}
    assert "cuda_context_gb" in memory                 # --cuda-context-gb
    assert not memory & {"json", "plot", "profile", "html", "as_json"}  # outputs and paths


def test_openapi_describes_the_cli_types_choices_bounds_and_defaults(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/api/memory"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["$ref"].endswith("/MemoryRequest")
    schemas = spec["components"]["schemas"]
    props = schemas["MemoryRequest"]["properties"]
    assert props["micro_batch"]["minimum"] == 1 and props["micro_batch"]["default"] == 1
    assert props["zero"]["maximum"] == 3
    # defaults as click itself resolved them from the typer declaration (an independent path)
    click_cmd = typer.main.get_command(get_app()).commands["memory"]  # type: ignore[attr-defined]
    click_defaults = {p.name: p.default for p in click_cmd.params}
    assert props["seq_len"]["default"] == click_defaults["seq_len"]
    assert props["micro_batch"]["default"] == click_defaults["micro_batch"]
    mode = schemas[props["mode"]["$ref"].rsplit("/", 1)[-1]]
    assert mode["enum"] == ["train", "infer"]
    assert props["mode"]["default"] == "train"
    assert "config" in props and "model" in props
    assert schemas["MemoryRequest"]["additionalProperties"] is False


@pytest.mark.parametrize("args,body", [
    (["memory", "llama-3-8b", "--gpu", "a100", "--micro-batch", "2", "--seq-len", "4096",
      "--zero", "3", "--dp", "8", "--recompute", "full", "--fused"],
     {"model": "llama-3-8b", "gpu": "a100", "micro_batch": 2, "seq_len": 4096, "zero": 3,
      "dp": 8, "recompute": "full", "fused": True}),
    (["memory", "llama-3-70b", "--gpu", "h100", "--mode", "infer", "--tp", "2", "--batch", "8",
      "--context", "8192", "--kv-dtype", "fp8", "--fix"],
     {"model": "llama-3-70b", "gpu": "h100", "mode": "infer", "tp": 2, "batch": 8,
      "context": 8192, "kv_dtype": "fp8", "fix": True}),
    (["roofline", "gpt2", "--gpu", "a100", "--phase", "decode", "--seq-len", "1024"],
     {"model": "gpt2", "gpu": "a100", "phase": "decode", "seq_len": 1024}),
    (["train", "gpt2-large", "--gpu", "rtx-4090", "--gpus", "8", "--zero", "0", "--scaling",
      "--usd-per-gpu-hour", "0.5"],
     {"model": "gpt2-large", "gpu": "rtx-4090", "gpus": 8, "zero": 0, "scaling": True,
      "usd_per_gpu_hour": 0.5}),
])
def test_the_answer_is_exactly_the_cli_json(client: TestClient, args: list[str],
                                             body: dict) -> None:
    r = client.post(f"/api/{args[0]}", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == cli_json(*args)


def test_memory_bytes_equal_the_cli(client: TestClient) -> None:
    r = client.post("/api/memory", json={"model": "gpt2", "micro_batch": 4}).json()
    cli = cli_json("memory", "gpt2", "--micro-batch", "4")
    assert isinstance(r["total_bytes"], int)
    assert r["total_bytes"] == cli["total_bytes"] and r["per_gpu"] == cli["per_gpu"]


def test_an_uploaded_config_equals_the_cli_on_that_file(client: TestClient,
                                                         tmp_path: Path) -> None:
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    r = client.post("/api/memory", json={"config": LLAMA_CONFIG, "micro_batch": 2})
    assert r.status_code == 200, r.text
    assert r.json() == cli_json("memory", str(folder / "config.json"), "--micro-batch", "2")
    assert r.json()["model"] == "tiny-llama"


def test_view_adds_svg_charts_to_the_same_result(client: TestClient) -> None:
    body = {"model": "gpt2", "gpu": "a100"}
    v = client.post("/view/memory", json=body).json()
    assert v["result"] == client.post("/api/memory", json=body).json()
    assert v["charts"] and v["charts"][0]["svg"].startswith("<svg")


BAD = [  # (body bytes or object, content type) -> every one a 4xx with an error line
    (b'{"model": "gpt2", "micro_batch": ', "application/json"),         # truncated
    (b'{"model": "gpt2",, }', "application/json"),                      # malformed
    (b"hello", "application/json"),                                    # not JSON
    (b"", "application/json"),                                         # empty
    (b"null", "application/json"),
    (b'["gpt2"]', "application/json"),                                 # not an object
    (b'"gpt2"', "application/json"),
    (b'{"model": "gpt2"}', "text/plain"),                              # wrong type
    (b'{"model": "gpt2"}', "application/x-www-form-urlencoded"),
    (b"\xff\xfe{}", "application/json"),                               # not UTF-8
    (b"[" * 100_000 + b"]" * 100_000, "application/json"),             # nested deep
    (b'{"model": "gpt2", "config": ' + b"[" * 40 + b"]" * 40 + b"}",      # deep inside
     "application/json"),
    (b'{"model": "gpt2", "margin": NaN}', "application/json"),
    (b'{"model": "gpt2", "margin": Infinity}', "application/json"),
    (b'{"model": "gpt2", "margin": -Infinity}', "application/json"),
    (b'{"model": "gpt2", "padding": "' + b"x" * 400_000 + b'"}', "application/json"),  # large
    ({"model": "gpt2", "micro_batch": -1}, None),                      # negative
    ({"model": "gpt2", "micro_batch": 0}, None),
    ({"model": "gpt2", "micro_batch": "four"}, None),                  # non-numeric
    ({"model": "gpt2", "micro_batch": 1.5}, None),
    ({"model": "gpt2", "micro_batch": 10**30}, None),                  # absurd
    ({"model": "gpt2", "seq_len": 2**31}, None),
    ({"model": "gpt2", "margin": 1e300}, None),
    ({"model": "gpt2", "margin": "NaN"}, None),
    ({"model": "gpt2", "cuda_context_gb": -0.5}, None),
    ({"model": "gpt2", "zero": 4}, None),
    ({"model": "gpt2", "mode": "serve"}, None),                        # not a choice
    ({"model": "llama-9b"}, None),                                     # unknown names
    ({"model": "gpt2", "gpu": "h1000"}, None),
    ({"model": "gpt2", "gpu": ""}, None),
    ({"model": "gpt2", "target": "tpu"}, None),
    ({"model": "gpt2", "unknown_option": 1}, None),                    # unknown field
    ({"model": "gpt2", "json": True}, None),
    ({"model": "gpt2", "plot": "/tmp/x.png"}, None),                   # paths
    ({"model": "gpt2", "profile": "/etc/passwd"}, None),
    ({"model": "/etc/passwd"}, None),
    ({"model": "../../etc"}, None),
    ({"model": "~/models/llama"}, None),
    ({"model": "config.json"}, None),
    ({"model": "gpt2", "gpu": "/tmp/evil.toml"}, None),
    ({"model": "gpt2", "gpu": "evil.toml"}, None),
    ({"model": "gpt2", "gpu": "C:\\x"}, None),
    ({"model": "gpt2", "gpu": "h100\u0000"}, None),
    ({"model": "gpt2", "gpu": "x" * 1000}, None),
    ({}, None),                                                        # model missing
    ({"model": "gpt2", "config": LLAMA_CONFIG}, None),                 # both
    ({"config": ["model_type", "llama"]}, None),                       # config not an object
    ({"config": {"model_type": "not-a-model"}}, None),
    ({"config": {"model_type": "llama"}}, None),                       # fields missing
    ({"config": {**LLAMA_CONFIG, "hidden_size": -4}}, None),
    ({"config": {**LLAMA_CONFIG, "num_attention_heads": "eight"}}, None),
    ({"model": "gpt2", "micro_batch": True, "seq_len": [1]}, None),
]


@pytest.mark.parametrize("payload,ctype", BAD)
def test_every_bad_payload_gets_a_4xx_json_error(client: TestClient, payload: object,
                                                  ctype: str | None) -> None:
    if ctype is None:
        r = client.post("/api/memory", json=payload)
    else:
        r = client.post("/api/memory", content=payload, headers={"content-type": ctype})
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    err = r.json()
    assert isinstance(err["error"], str) and err["error"] and "Traceback" not in err["error"]


@pytest.mark.parametrize("body,field", [
    ({"model": "gpt2", "micro_batch": -1}, "micro_batch"),
    ({"model": "gpt2", "gpu": "h1000"}, "gpu"),
    ({"model": "llama-9b"}, "model"),
    ({"model": "gpt2", "target": "tpu"}, "target"),
    ({"model": "gpt2", "gpu": "/tmp/evil.toml"}, "gpu"),
    ({"model": "gpt2", "unknown_option": 1}, "unknown_option"),
    ({"config": {"model_type": "not-a-model"}}, "config"),
])
def test_the_error_names_the_field(client: TestClient, body: dict, field: str) -> None:
    r = client.post("/api/memory", json=body)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert "/tmp/gpuplan-web-" not in r.text  # the server's temp folder is not shown


def test_other_endpoints_refuse_bad_input_too(client: TestClient) -> None:
    for name, body in [("roofline", {"model": "gpt2", "phase": "backward"}),
                       ("train", {"model": "gpt2", "gpus": 7, "tp": 2}),
                       ("train", {"model": "gpt2", "gpus": 0}),
                       ("flops", {"model": "gpt2", "batch": -3}),
                       ("hardware", {"name": "/etc/passwd"}),
                       ("models", {"name": "../config.json"})]:
        r = client.post(f"/api/{name}", json=body)
        assert 400 <= r.status_code < 500, (name, r.text)


def test_unknown_command_method_and_size_limits() -> None:
    c = TestClient(create_app(max_body_bytes=1000))
    assert c.post("/api/bench", json={}).status_code == 404     # measures the machine: not served
    assert c.post("/api/web", json={}).status_code == 404
    assert c.get("/api/memory").status_code == 405
    big = {"model": "gpt2", "config": None, "pad": "x" * 2000}
    assert c.post("/api/memory", json=big).status_code == 413
    r = c.post("/api/memory", content=b"{}", headers={"content-type": "application/json",
                                                      "content-length": "999999"})
    assert r.status_code == 413


def test_a_call_over_the_time_limit_is_refused_not_waited_for() -> None:
    c = TestClient(create_app(time_limit_s=0.05))
    t0 = time.perf_counter()
    r = c.post("/api/train", json={"model": "llama-3-70b", "gpus": 4096, "global_batch": 4096,
                                   "search": True})
    assert r.status_code == 503 and "limit" in r.json()["error"]
    assert time.perf_counter() - t0 < 5
    # a runaway calculation is stopped, not left holding the server: the next call is served
    r = c.post("/api/memory", json={"model": "llama-3-8b", "pp": 2**20, "global_batch": 7})
    assert r.status_code in (422, 503), r.text
    t0 = time.perf_counter()
    ok = TestClient(create_app(time_limit_s=30)).post("/api/flops", json={"model": "gpt2"})
    assert ok.status_code == 200 and time.perf_counter() - t0 < 10


def test_security_headers_no_cdn_and_loopback_hosts() -> None:
    c = TestClient(create_app(allowed_hosts=["127.0.0.1", "localhost"]), base_url="http://127.0.0.1")
    r = c.get("/")
    assert r.status_code == 200
    for h in ("content-security-policy", "x-content-type-options", "x-frame-options",
              "referrer-policy"):
        assert h in r.headers
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert "http://" not in r.text and "https://" not in r.text  # every asset is local
    assert c.get("/static/app.js").status_code == 200
    assert "http" not in c.get("/static/app.js").text.replace("http.response", "")
    assert c.get("/docs").status_code == 404  # Swagger UI would load from a CDN
    evil = TestClient(create_app(allowed_hosts=["127.0.0.1"]), base_url="http://evil.example")
    assert evil.get("/").status_code == 400  # DNS rebinding: a foreign Host is refused


FINITE = st.floats(allow_nan=False, allow_infinity=False)  # NaN/Infinity: tested raw above
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | FINITE | st.text(max_size=12),
                       lambda c: st.lists(c, max_size=3)
                       | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["model", "gpu", "mode", "micro_batch", "seq_len", "batch",
                                        "context", "zero", "tp", "dp", "precision", "margin",
                                        "config", "other"]), JSONISH, max_size=5))
def test_fuzzed_bodies_never_get_a_5xx(client: TestClient, body: dict) -> None:
    body.setdefault("model", "gpt2")
    r = client.post("/api/memory", json=body)
    assert r.status_code < 500, (body, r.text[:300])


def test_gpuplan_web_defaults_to_loopback_and_refuses_a_busy_port() -> None:
    web = {p.field: p for p in command_params(registered_commands(get_app())["web"])}
    assert web["host"].default == "127.0.0.1" and web["port"].default == 8765
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "web", "--port", str(port)],
                           capture_output=True, text=True, timeout=60,
                           env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--port" in p.stderr
