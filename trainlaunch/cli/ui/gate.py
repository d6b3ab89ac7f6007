"""The web page's gate: every request shows the token or is refused (403), and every response
carries the headers that keep the page to itself.

The token comes once in the URL (``?token=``, as ``trainlaunch ui`` prints it); the answer
sets it as an HttpOnly, SameSite=Strict cookie (named with the port, so two servers on one
host keep theirs apart) and a page's address loses it at once (a redirect), so it stays out
of the history. Scripts may send ``Authorization: Bearer TOKEN`` instead.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# no CDN, no inline script or style, no framing, no form posts, no referrer (the URL may
# still carry the token when the page is first opened)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
REFUSED = {
    "error": "forbidden: this page needs the token that `trainlaunch ui` printed",
    "hint": "open the URL `trainlaunch ui` printed (it carries ?token=...)",
}


def cookie_name(scope: Scope) -> str:
    """One cookie per port: two servers on one host do not overwrite each other's."""
    server = scope.get("server") or ("", 0)
    return f"trainlaunch-ui-{server[1]}"


class TokenGate:
    """ASGI middleware: the token or 403; security headers on every answer."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        in_query = next((v for k, v in query if k == "token"), None)
        name = cookie_name(scope)
        if self._ok(in_query):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            if scope["method"] == "GET" and not scope["path"].startswith(("/api/", "/charts/")):
                # the page's address drops the token at once; the cookie carries it on
                location = scope["path"] + (f"?{rest}" if rest else "")
                await _send(
                    send,
                    303,
                    b"",
                    b"text/plain",
                    [(b"location", location.encode())],
                    name,
                    self._token,
                )
                return
            await self.app(scope, receive, _with_headers(send, name, self._token))
            return
        headers = dict(scope.get("headers") or [])
        bearer = headers.get(b"authorization", b"").decode("latin-1")
        given = bearer[7:] if bearer.lower().startswith("bearer ") else None
        if given is None:
            cookies = SimpleCookie(headers.get(b"cookie", b"").decode("latin-1"))
            given = cookies[name].value if name in cookies else None
        if not self._ok(given):
            await _send(send, 403, json.dumps(REFUSED).encode(), b"application/json", [])
            return
        await self.app(scope, receive, _with_headers(send, None, None))


def _cookie(name: str, token: bytes) -> tuple[bytes, bytes]:
    value = f"{name}={token.decode()}; Path=/; HttpOnly; SameSite=Strict"
    return (b"set-cookie", value.encode())


def _with_headers(send: Send, name: str | None, token: bytes | None) -> Send:
    """send, with the security headers (and the cookie) added to the response's start."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            extra = list(SECURITY_HEADERS)
            if name and token:
                extra.append(_cookie(name, token))
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    headers: list[tuple[bytes, bytes]],
    name: str | None = None,
    token: bytes | None = None,
) -> None:
    start = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await _with_headers(send, name, token)(
        {"type": "http.response.start", "status": status, "headers": [*start, *headers]}
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["CSP", "TokenGate", "cookie_name"]
