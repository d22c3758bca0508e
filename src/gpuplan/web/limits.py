"""ASGI guard in front of the API: body size and JSON shape limits, security headers.

Checks run before FastAPI parses anything, so a hostile body (too large, truncated, not JSON,
NaN/Infinity, nested thousands deep) is refused with one 4xx JSON line and never reaches a
parser that could recurse or a handler that could fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from gpuplan.specs.files import json_depth as text_json_depth

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
     b"frame-ancestors 'none'"),
]


class BadBody(Exception):
    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


MAX_INT_DIGITS = 30
"""digits of a JSON integer in a body (no field takes more; 2**64 has 20)"""
_KEY_OF_BAD_NUMBER = re.compile(r'"([A-Za-z_][A-Za-z0-9_]{0,63})"\s*:\s*'
                                r"(?:-?(?:NaN|Infinity)|-?\d{" + str(MAX_INT_DIGITS + 1) + ",})")


def json_depth(raw: bytes) -> int:
    """Deepest nesting of [ and { outside strings: the file loaders' scan (specs/files.py) on
    the body; undecodable bytes become U+FFFD, which is never a bracket, quote or backslash."""
    return text_json_depth(raw.decode("utf-8", errors="replace"))


def _no_constant(name: str) -> Any:
    raise BadBody(400, f"{name} is not a JSON number; give a finite number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BadBody(422, f"an integer of {len(text):,} digits; no field takes more than "
                           f"{MAX_INT_DIGITS}")
    return int(text)


def check_body(raw: bytes, max_depth: int) -> None:
    """Raise BadBody unless `raw` is one JSON object, finite, at most `max_depth` deep."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadBody(400, "body: not UTF-8 text; send a JSON object") from None
    if json_depth(raw) > max_depth:
        raise BadBody(400, f"body: nested deeper than {max_depth} levels")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_int=_bounded_int)
    except BadBody as e:  # name the field that holds the number (the first such key)
        m = _KEY_OF_BAD_NUMBER.search(text)
        field = m.group(1) if m else None
        raise BadBody(e.status, f"{field or 'body'}: {e.message}", field) from None
    except json.JSONDecodeError as e:
        raise BadBody(400, f"body: not valid JSON ({e.msg} at line {e.lineno} column "
                           f"{e.colno})") from None
    except (ValueError, RecursionError):
        raise BadBody(400, "body: not valid JSON (nested too deeply or a number out of range)"
                      ) from None
    if not isinstance(value, dict):
        kinds = {list: "an array", str: "a string", bool: "true/false", type(None): "null"}
        got = kinds.get(type(value), "a number")
        raise BadBody(422, f"body: expected a JSON object {{...}}, got {got}")


class Guard:
    """Wraps the app: limits on POST bodies under `prefixes`; security headers on everything."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_depth: int,
                 prefixes: tuple[str, ...] = ("/api/", "/view/", "/report/")) -> None:
        self.app, self.max_body, self.max_depth, self.prefixes = app, max_body_bytes, max_depth, \
            prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secure(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                msg["headers"] = [*msg.get("headers", []), *SECURITY_HEADERS,
                                  (b"cache-control", b"no-store")]
            await send(msg)

        if scope["method"] != "POST" or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send_secure)
            return
        try:
            raw = await self._read(scope, receive)
            check_body(raw, self.max_depth)
        except BadBody as e:
            await _reply(send_secure, e.status, e.message, e.field)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await self.app(scope, replay, send_secure)

    async def _read(self, scope: Scope, receive: Receive) -> bytes:
        headers = dict(scope.get("headers", []))
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if ctype != b"application/json":
            raise BadBody(415, "body: send Content-Type: application/json")
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            raise BadBody(413, f"body: larger than {self.max_body} bytes")
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise BadBody(400, "body: the client went away before sending it all")
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise BadBody(413, f"body: larger than {self.max_body} bytes")
            chunks.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(chunks)


async def _reply(send: Send, status: int, message: str, field: str | None = None) -> None:
    body = json.dumps({"error": message, "field": field}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
