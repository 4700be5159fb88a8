"""The ASGI middlewares that bound a request body: `--payload-limit` refuses one over the
limit with 413, before it is read into memory or parsed; `--body-timeout` answers 408 and
closes the connection of a client that takes longer to send it."""

from __future__ import annotations

import asyncio

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


class BodyTimeout:
    """Raises HTTPException(408), with `Connection: close` (uvicorn then closes the
    connection), when the app's reads of a body have not received all of it `seconds` after
    the first read. Reads after the body (waiting for the client to disconnect) have no
    deadline. uvicorn has no timeout of its own between a request's headers and the end of
    its body."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        body_done = False

        async def receive_in_time() -> Message:
            nonlocal deadline, body_done
            if body_done:
                return await receive()
            if deadline is None:
                deadline = loop.time() + self.seconds
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise HTTPException(408, f"the body did not arrive within the server's "
                                    f"--body-timeout of {self.seconds:g} s: send it whole, "
                                    "at once", headers={"Connection": "close"}) from None
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        await self.app(scope, receive_in_time, send)
