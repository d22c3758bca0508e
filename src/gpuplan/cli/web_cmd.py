"""`gpuplan web`: the local calculator page and JSON API (FastAPI + uvicorn, the `web` extra)."""

from __future__ import annotations

import ipaddress
import socket
from typing import Annotated

import typer

from gpuplan.errors import GpuplanError


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_free(host: str, port: int) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise GpuplanError(f"--host: {host!r} is not an address of this machine") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind(addr)
        except OSError as e:
            raise GpuplanError(f"--port: cannot listen on {host}:{port} ({e.strerror}); "
                               "choose another port") from None


def register(app: typer.Typer) -> None:
    @app.command()
    def web(
        host: Annotated[str, typer.Option(
            "--host", help="address to listen on (loopback only unless you say otherwise)")] =
        "127.0.0.1",
        port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8765,
        time_limit: Annotated[float, typer.Option(
            "--time-limit", min=0.1, max=600, help="seconds one calculation may take")] = 20.0,
    ) -> None:
        """Serve the calculator page and the JSON API (POST /api/<command>) on this machine."""
        try:
            import uvicorn

            from gpuplan.web.app import create_app
        except ImportError:
            raise GpuplanError("gpuplan web needs FastAPI and uvicorn: "
                               "pip install 'gpuplan[web]'") from None
        _check_free(host, port)
        hosts = ["127.0.0.1", "localhost", host] if _loopback(host) else None
        if not _loopback(host):
            typer.echo(f"warning: listening on {host}, reachable from other machines; the API "
                       "has no authentication", err=True)
        typer.echo(f"gpuplan web: http://{host}:{port}/  (API: /openapi.json; Ctrl-C stops)",
                   err=True)
        uvicorn.run(create_app(time_limit_s=time_limit, allowed_hosts=hosts), host=host,
                    port=port, log_level="warning")
