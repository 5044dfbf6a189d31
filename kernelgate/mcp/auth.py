"""The HTTP transport's guard: where it may listen, and a bearer token checked on every request.

It listens on localhost unless told otherwise; on any other address it refuses to start without a token
(`--token` or KERNELGATE_MCP_TOKEN, at least MIN_TOKEN characters). With a token, every HTTP request must carry
`Authorization: Bearer <token>` (compared in constant time); anything else gets 401 before it reaches the MCP
application. On localhost a token is optional and checked when given.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any, Awaitable, Callable

from ..errors import KernelgateError
from ..records import Reason

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
MIN_TOKEN = 16
TOKEN_ENV = "KERNELGATE_MCP_TOKEN"


def is_loopback(host: str) -> bool:
    h = host.strip().strip("[]")
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def parse_address(text: str | None) -> tuple[str, int]:
    """HOST:PORT, [V6]:PORT, :PORT or PORT (host 127.0.0.1); usage error otherwise."""
    t = (text or "").strip()
    if not t:
        return DEFAULT_HOST, DEFAULT_PORT
    host, sep, port = t.rpartition(":")
    if not sep:
        host, port = "", t
    host = host.strip("[]") or DEFAULT_HOST
    try:
        p = int(port)
    except ValueError:
        raise KernelgateError(f"--http takes HOST:PORT (e.g. 127.0.0.1:8765), got '{text}'", Reason.USAGE) from None
    if not 0 <= p < 65536:
        raise KernelgateError(f"--http: port {p} is out of range", Reason.USAGE)
    return host, p


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen off localhost without a token (usage error, exit 2); refuse a short token anywhere."""
    if token is not None and len(token) < MIN_TOKEN:
        raise KernelgateError(f"the token must have at least {MIN_TOKEN} characters (e.g. python -c 'import "
                              "secrets; print(secrets.token_urlsafe(32))')", Reason.USAGE)
    if not token and not is_loopback(host):
        raise KernelgateError(f"refusing to listen on {host} without a token: anyone who reaches it could run "
                              f"evaluations; set --token or {TOKEN_ENV} (clients send 'Authorization: Bearer "
                              "TOKEN'), or listen on 127.0.0.1", Reason.USAGE)


Scope = dict[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class BearerAuth:
    """ASGI middleware: every HTTP (and websocket) request must carry the bearer token; lifespan passes."""

    def __init__(self, app: ASGI, token: str):
        if not token:
            raise ValueError("BearerAuth needs a token")
        self.app = app
        self.token = token.encode()

    def allowed(self, scope: Scope) -> bool:
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, given = values[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": "unauthorized", "message": "this kernelgate MCP server needs "
                           "'Authorization: Bearer <token>'"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="kernelgate"')]})
        await send({"type": "http.response.body", "body": body})
