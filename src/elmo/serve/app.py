"""The HTTP app of `elmo serve`: TEI's routes (`elmo.serve.routes_tei`) and OpenAI's
`/v1/embeddings` (`elmo.serve.routes_openai`) over a batching queue in front of one Embedder
(`elmo.serve.service.Service`).

The model loads in the background once the server listens: `/health` answers 503 until it
is ready, then 200. Every error is a JSON body with a one-line message, never a traceback.
The event loop only routes: tokenizing the inputs and writing an answer run in threads, the
model in the queue's, so that no request keeps `/health` (or any other) waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from elmo import __version__
from elmo.embedding import Embedder, EmbedSettings
from elmo.loading.formats.registry import NATIVE
from elmo.serve import routes_openai, routes_tei
from elmo.serve.answers import json_response
from elmo.serve.limits import ServeLimits
from elmo.serve.metrics import Metrics, MetricsMiddleware
from elmo.serve.payload import BodyTimeout, PayloadLimit
from elmo.serve.schemas import describe_unparsable_body, describe_validation_errors
from elmo.serve.service import ApiError, ClientGone, Service

CLIENT_CLOSED = 499  # nginx's status for a request whose client went away (never sent)
# `error_type` of the errors that the middlewares raise as HTTPException, by status.
HTTP_ERROR_TYPES = {408: "Timeout", 413: "PayloadTooLarge"}
# the API families, each a router of its routes
ROUTERS: tuple[APIRouter, ...] = (routes_tei.router, routes_openai.router)


def _error(request: Request, status: int, message: str, error_type: str,
           headers: dict[str, str] | None = None) -> Response:
    """TEI's error body; OpenAI's on its routes, as its clients read `error.message`."""
    if request.url.path.startswith("/v1/"):
        body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    else:
        body = {"error": message, "error_type": error_type}
    answer = json_response(body, status)
    answer.headers.update(headers or {})
    return answer


async def _api_error(request: Request, err: ApiError) -> Response:
    return _error(request, err.status, err.message, err.error_type)


async def _client_gone(request: Request, err: ClientGone) -> Response:
    return Response(status_code=CLIENT_CLOSED)  # nobody reads it; the metrics count it


async def _invalid_request(request: Request, err: RequestValidationError) -> Response:
    message = describe_validation_errors(err.errors())
    if "json" not in request.headers.get("content-type", ""):
        message += " (send JSON with the header Content-Type: application/json)"
    return _error(request, 422, message, "Validation")


async def _http_error(request: Request, err: HTTPException) -> Response:
    if err.status_code == 400 and err.__cause__ is not None:  # FastAPI's parsing failed
        return _error(request, 422, describe_unparsable_body(err.__cause__), "Validation")
    kind = HTTP_ERROR_TYPES.get(err.status_code, "Http")
    return _error(request, err.status_code, str(err.detail), kind, err.headers)


async def _internal_error(request: Request, err: Exception) -> Response:
    # Starlette re-raises it after this answer, so the log has the traceback.
    return _error(request, 500, f"internal error ({type(err).__name__}); the server's "
                  "log has the details", "Backend")


ERROR_HANDLERS = {ApiError: _api_error, ClientGone: _client_gone,
                  RequestValidationError: _invalid_request, HTTPException: _http_error,
                  Exception: _internal_error}


# ---- the app ------------------------------------------------------------------------------


def create_app(
    load: Callable[[], Embedder],
    *,
    model_name: str = "default",
    model_format: str = NATIVE.name,
    layers: str = "all",
    limits: ServeLimits | None = None,
    on_ready: Callable[[Embedder], None] | None = None,
    on_failure: Callable[[Exception], None] | None = None,
) -> FastAPI:
    """The app: the routes of `ROUTERS` over a Service; `load()` builds the Embedder in a thread
    once the server has started. `layers` is `/embed_all`'s default. `on_ready` /
    `on_failure` are called from the event loop when the model is ready or failed to load."""
    limits = limits or ServeLimits()
    service = Service(load, model_name, model_format, EmbedSettings(layers=layers), limits,
                      Metrics())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loading = asyncio.create_task(service.start(on_ready, on_failure))
        yield
        # Here uvicorn has answered every request in flight: nothing waits in the queue.
        loading.cancel()
        if service.queue is not None:
            await service.queue.stop()

    app = FastAPI(title="elmo serve", version=__version__, lifespan=lifespan,
                  exception_handlers=ERROR_HANDLERS)
    app.state.service = service
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(PayloadLimit, limit=limits.payload_limit)
    app.add_middleware(BodyTimeout, seconds=limits.body_timeout)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics,
                       routes=[route.path for router in ROUTERS for route in router.routes])
    return app
