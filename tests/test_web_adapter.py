"""The adapter on a command it has never seen: a new command gets its endpoint, its schema
and the command's own JSON, with nothing written for it (as serve, cost, plan, advise will)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import pytest
import typer

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient

from gpuplan.errors import InputError
from gpuplan.web.app import create_app


class Goal(str, Enum):
    pretrain = "pretrain"
    serve = "serve"


def new_cli() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def advise(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset")],
        micro_batch: Annotated[int, typer.Option("--micro-batch", "--batch", "-b", min=1)] = 1,
        goal: Annotated[Goal, typer.Option("--goal")] = Goal.pretrain,
        budget: Annotated[float | None, typer.Option("--budget-usd", min=0)] = None,
        gpus: Annotated[list[int] | None, typer.Option("--gpus", min=1)] = None,
        quick: Annotated[bool, typer.Option("--quick")] = False,
        out: Annotated[Path | None, typer.Option("--out")] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Rank devices for a goal."""
        if model == "nope":
            raise InputError("model", model, "a preset")
        given = sorted(k for k in ctx.params
                       if ctx.get_parameter_source(k).name == "COMMANDLINE")
        print(json.dumps({"model": model, "goal": goal.value, "budget_usd": budget,
                          "gpus": gpus, "quick": quick, "json": as_json,
                          "micro_batch": micro_batch, "given": given}))

    @app.command()
    def cost(gpu: str = typer.Argument(..., help="device"),  # the older typer style
             years: float = typer.Option(3.0, "--years", min=0.1, max=30),
             as_json: bool = typer.Option(False, "--json")) -> None:
        """Buy or rent."""
        print(json.dumps({"gpu": gpu, "years": years}))

    return app


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(cli=new_cli()))


def test_a_new_command_gets_an_endpoint_and_an_exact_schema(client: TestClient) -> None:
    assert set(client.get("/api/commands").json()["commands"]) == {"advise", "cost"}
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    props = schemas["AdviseRequest"]["properties"]
    assert set(props) == {"model", "config", "micro_batch", "goal", "budget_usd", "gpus",
                          "quick"}  # no path
    assert "'batch'" in props["micro_batch"]["description"]  # the alias is documented
    assert "batch" in client.get("/api/commands").json()["commands"]["advise"]["fields"]
    assert schemas["Goal"]["enum"] == ["pretrain", "serve"]
    gpus = props["gpus"]["anyOf"][0]
    assert gpus["type"] == "array" and gpus["items"]["minimum"] == 1
    cost = schemas["CostRequest"]
    assert cost["required"] == ["gpu"]
    assert cost["properties"]["years"]["maximum"] == 30 and \
        cost["properties"]["years"]["default"] == 3.0


def test_the_body_becomes_the_command_arguments(client: TestClient) -> None:
    r = client.post("/api/advise", json={"model": "-h", "goal": "serve", "budget_usd": 1e6,
                                         "gpus": [8, 16], "quick": True})
    assert r.status_code == 200, r.text
    assert r.json() == {"model": "-h", "goal": "serve", "budget_usd": 1e6, "gpus": [8, 16],
                        "quick": True, "json": True, "micro_batch": 1,  # '-h': a value
                        "given": ["as_json", "budget", "goal", "gpus", "model", "quick"]}
    # only what the body gave reaches the command as given; an alias is the same option
    r = client.post("/api/advise", json={"model": "x", "batch": 4}).json()
    assert r["micro_batch"] == 4 and r["given"] == ["as_json", "micro_batch", "model"]
    assert client.post("/api/cost", json={"gpu": "h100"}).json() == {"gpu": "h100",
                                                                    "years": 3.0}


@pytest.mark.parametrize("body,field", [
    ({"model": "x", "goal": "finetune"}, "goal"),
    ({"model": "x", "budget_usd": -1}, "budget_usd"),
    ({"model": "x", "gpus": [0]}, "gpus"),
    ({"model": "x", "gpus": list(range(1, 100))}, "gpus"),
    ({"model": "x", "out": "report.html"}, "out"),
    ({"model": "nope"}, "model"),
])
def test_its_errors_name_the_field(client: TestClient, body: dict, field: str) -> None:
    r = client.post("/api/advise", json=body)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
