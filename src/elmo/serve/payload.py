"""`--payload-limit`: the ASGI middleware that refuses a request body over the limit with 413,
before it is read into memory or parsed."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class PayloadLimit:
    """Raises HTTPException(413) when the app reads a body over `limit` bytes: at its first
    read when Content-Length says so (nothing is read), else once the chunks read pass it.
    The app's handler for HTTPException writes the answer, as JSON like every error.
    (Starlette's own limit answers plain text when the body has a Content-Length.)"""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        received = 0

        async def receive_within_limit() -> Message:
            nonlocal received
            if declared.isdigit() and int(declared) > self.limit:
                raise self.too_large(f"{int(declared):,} bytes, more")
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise self.too_large("more bytes")
            return message

        await self.app(scope, receive_within_limit, send)

    def too_large(self, size: str) -> HTTPException:
        return HTTPException(413, f"the body has {size} than the server's --payload-limit "
                             f"{self.limit:,}: send fewer or shorter inputs per request")
