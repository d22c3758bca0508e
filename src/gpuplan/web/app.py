"""The FastAPI app: `POST /api/<command>` for each CLI command, generated from the command
itself (see commands.py, requests.py, runner.py); `POST /view/<command>` adds the charts the
HTML reports draw; `POST /report/<command>` answers the HTML report itself; the page at `/`
with its assets from the package (no CDN).

Commands not served: `bench` (it measures the serving machine for minutes), `profile` (it runs a
script from a path), `web` itself. Every other registered command appears, so commands added
later (serve, cost, plan, advise) get their endpoint without a line here.
"""

from importlib import resources
from pathlib import Path
from typing import Any

import typer
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from gpuplan import __version__
from gpuplan.report.charts import charts_for
from gpuplan.report.html import render_report
from gpuplan.web.commands import Param, api_params, registered_commands
from gpuplan.web.limits import Guard
from gpuplan.web.requests import request_model
from gpuplan.web.runner import ApiError, run_json

NOT_SERVED = frozenset({"bench", "profile", "web"})
STATIC = Path(str(resources.files("gpuplan.web") / "static"))


def _error(status: int, field: Any, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, "field": field, **extra}, status_code=status)


def _routes(app: FastAPI, cli: typer.Typer, name: str, params: list[Param],
            model: type[BaseModel], time_limit_s: float) -> None:
    def api(body: model) -> JSONResponse:  # type: ignore[valid-type]
        return JSONResponse(run_json(cli, name, params, body, time_limit_s))

    def view(body: model) -> JSONResponse:  # type: ignore[valid-type]
        r = run_json(cli, name, params, body, time_limit_s)
        charts = [{"title": t, "svg": s} for t, s in charts_for(name, r)]
        return JSONResponse({"result": r, "charts": charts})

    def report(body: model) -> HTMLResponse:  # type: ignore[valid-type]
        r = run_json(cli, name, params, body, time_limit_s)
        inputs = body.model_dump(exclude_none=True, exclude={"config"})  # type: ignore[attr-defined]
        return HTMLResponse(render_report(name, r, inputs), headers={
            "content-disposition": f'attachment; filename="gpuplan-{name}.html"'})

    doc = (cli_doc := registered_commands(cli)[name].__doc__ or "").strip().splitlines()
    summary = doc[0] if doc else name
    bad: dict[int | str, dict[str, Any]] = {
        422: {"description": "bad input: {'error': one line, 'field': the field at fault}"},
        503: {"description": "busy, or over the time limit"}}
    app.add_api_route(f"/api/{name}", api, methods=["POST"], summary=summary,
                      description=f"Exactly `gpuplan {name} ... --json`. {cli_doc.strip()}",
                      responses=bad, tags=["commands"], operation_id=f"api_{name}")
    app.add_api_route(f"/report/{name}", report, methods=["POST"], response_class=HTMLResponse,
                      summary=f"{summary} (self-contained HTML report)", responses=bad,
                      tags=["page"], operation_id=f"report_{name}")
    app.add_api_route(f"/view/{name}", view, methods=["POST"], summary=f"{summary} (+ charts)",
                      description="{'result': the /api answer, 'charts': [{title, svg}]}",
                      responses=bad, tags=["page"], operation_id=f"view_{name}")


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                   "type": e.get("type", "")} for e in errs]
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        loc = [str(x) for x in first["loc"] if x != "body"]
        field = loc[0] if loc else None
        msg = str(first["msg"]).removeprefix("Value error, ")
        return _error(422, field, f"{'.'.join(loc) or 'body'}: {msg}", detail=detail)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.field, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, None, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> JSONResponse:
        return _error(500, None, f"internal error ({type(exc).__name__}); please report it")


def create_app(*, time_limit_s: float = 20.0, max_body_bytes: int = 256 * 1024,
               max_depth: int = 32, allowed_hosts: list[str] | None = None,
               cli: typer.Typer | None = None) -> Any:
    """The ASGI app (FastAPI inside the body/header guard) over `cli` (default: gpuplan's)."""
    if cli is None:
        from gpuplan.cli.main import get_app

        cli = get_app()
    app = FastAPI(title="gpuplan", version=__version__, docs_url=None, redoc_url=None,
                  description="The gpuplan CLI as a local JSON API: each `POST /api/<command>` "
                              "takes the command's options in snake_case and answers exactly "
                              "its --json object (SI units, bytes as integers).")
    served: dict[str, list[str]] = {}
    for name, fn in registered_commands(cli).items():
        if name in NOT_SERVED:
            continue
        params = api_params(fn)
        model = request_model(name, params)
        _routes(app, cli, name, params, model, time_limit_s)
        served[name] = [*model.model_fields, *(a for p in params for a in p.aliases)]

    @app.get("/api/commands", tags=["page"], summary="the served commands and their fields")
    def commands() -> dict[str, Any]:
        return {"commands": {n: {"endpoint": f"/api/{n}", "fields": f}
                             for n, f in served.items()}}

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _handlers(app)
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    return Guard(app, max_body_bytes=max_body_bytes, max_depth=max_depth)
