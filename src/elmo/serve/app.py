"""The HTTP app of `elmo serve`: TEI's routes (and OpenAI's `/v1/embeddings`) over a
batching queue in front of one Embedder.

The model loads in the background once the server listens: `/health` answers 503 until it
is ready, then 200. Every error is a JSON body with a one-line message, never a traceback.
The event loop only routes: tokenizing the inputs and writing an answer run in threads, the
model in the queue's, so that no request keeps `/health` (or any other) waiting.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated

import numpy as np
import orjson
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from safetensors.numpy import save as safetensors_bytes
from starlette.exceptions import HTTPException

from elmo import __version__
from elmo.embedding import Embedder, EmbedSettings
from elmo.layer_choice import LayerChoice, LayerChoiceError, parse_layer_choice
from elmo.loading.formats.registry import NATIVE
from elmo.memory import DeviceMemoryError
from elmo.serve.batching import BatchQueue
from elmo.serve.limits import ServeLimits
from elmo.serve.metrics import Metrics, MetricsMiddleware
from elmo.serve.payload import BodyTimeout, PayloadLimit
from elmo.serve.schemas import (
    EmbedAllRequest,
    EmbedRequest,
    ErrorResponse,
    Health,
    Input,
    LayerVectors,
    OpenAIEmbeddingRequest,
    OpenAIEmbeddingResponse,
    OpenAIErrorResponse,
    TeiRequest,
    Token,
    TokenizeRequest,
    TokenVectors,
    Vector,
    as_list,
    describe_unparsable_body,
    describe_validation_errors,
    error_responses,
    lone_surrogate,
)
from elmo.tokenize import Tokenizer, get_tokenizer

logger = logging.getLogger("elmo.serve")

BINARY = "application/octet-stream"  # /embed_all's safetensors answer
CLIENT_CLOSED = 499  # nginx's status for a request whose client went away (never sent)
TEI_ERRORS = error_responses(ErrorResponse)
# `error_type` of the errors that the middlewares raise as HTTPException, by status.
HTTP_ERROR_TYPES = {408: "Timeout", 413: "PayloadTooLarge"}


def _answers(model: object, description: str, errors: dict | None = None,
             binary: bool = False) -> dict:
    """`responses=` of a route, for its OpenAPI schema: its JSON answer (`model`), also
    safetensors bytes if `binary`, and its errors."""
    answer = {"model": model, "description": description}
    if binary:
        answer["content"] = {BINARY: {"schema": {"type": "string", "format": "binary"}}}
    return {200: answer, **(errors or {})}


class ApiError(Exception):
    """An answer other than 200, with TEI's `error_type`."""

    def __init__(self, status: int, message: str, error_type: str = "Validation") -> None:
        super().__init__(message)
        self.status, self.message, self.error_type = status, message, error_type


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class Service:
    """The model, its queue and the counters the routes share (one event loop, no locks).
    `settings.layers` is `/embed_all`'s default."""

    def __init__(self, load: Callable[[], Embedder], model_name: str, model_format: str,
                 settings: EmbedSettings, limits: ServeLimits, metrics: Metrics) -> None:
        self.load, self.model_name, self.model_format = load, model_name, model_format
        self.settings, self.limits, self.metrics = settings, limits, metrics
        self.embedder: Embedder | None = None
        self.queue: BatchQueue | None = None
        self.tokenize: Tokenizer | None = None
        self.failure: str | None = None
        self.in_flight = 0
        metrics.in_flight.set_function(lambda: self.in_flight)

    async def start(self, on_ready: Callable[[Embedder], None] | None,
                    on_failure: Callable[[Exception], None] | None) -> None:
        """Load the model off the event loop, run it and the tokenizer once (jieba loads
        its dictionary then), then open the queue."""
        try:
            embedder = await asyncio.to_thread(self.load)
            self.settings.layer_choice.check(embedder.model.num_layers)
            tokenize = embedder.tokenizer if callable(embedder.tokenizer) \
                else get_tokenizer(embedder.tokenizer)
            tokens = await asyncio.to_thread(tokenize, "warm up .")
            await asyncio.to_thread(embedder.embed_sentences, [tokens])
        except Exception as err:  # a user error (no such model, ...) or a broken file
            self.failure = f"{type(err).__name__}: {err}"
            if on_failure is not None:
                on_failure(err)
            else:
                logger.error("the model failed to load: %s", self.failure)
            return
        self.tokenize = tokenize
        self.queue = BatchQueue(embedder, self.limits.max_batch_tokens, self.metrics.record_batch)
        self.metrics.watch_queue(lambda: self.queue.depth)
        self.queue.start()
        self.embedder = embedder
        if on_ready is not None:
            on_ready(embedder)

    def ready(self) -> Embedder:
        """The Embedder, or 503 while it loads (or if it failed to)."""
        if self.embedder is None:
            state = f"failed to load ({self.failure})" if self.failure else "still loading"
            raise ApiError(503, f"the model is {state}", "Unhealthy")
        return self.embedder

    async def sentences(self, inputs: str | list[Input], field: str,
                        tei: TeiRequest | None = None) -> list[list[str]]:
        """Requests' inputs -> token lists, tokenized in a thread (off the event loop), with
        413 past the limits and 422 for an empty request or input or a lone surrogate.
        `field` names the inputs in messages; `tei`, the request of a TEI route, may ask to
        truncate inputs that are too long."""
        self.ready()
        return await asyncio.to_thread(self._sentences, inputs, field, tei)

    def _sentences(self, inputs: str | list[Input], field: str,
                   tei: TeiRequest | None) -> list[list[str]]:
        items = as_list(inputs)
        limit = self.limits.max_client_batch_size
        if not items:
            raise ApiError(422, f"{field} is empty: give at least one input")
        if len(items) > limit:
            raise ApiError(413, f"{field} has {len(items)} inputs, more than the server's "
                           f"--max-client-batch-size {limit}: send them in several requests")
        if tei is not None and tei.prompt_name is not None:
            raise ApiError(422, "prompt_name: this model has no prompts (instructions put "
                           "before the input, as some embedding models have): leave it out")
        cut = None if tei is None else tei.cut()
        max_tokens = self.limits.max_input_tokens
        sentences = []
        for i, item in enumerate(items):
            name = field if isinstance(inputs, str) else f"{field}[{i}]"
            _refuse_lone_surrogates(name, item)
            tokens = self.tokenize(item) if isinstance(item, str) else item
            if not tokens:
                raise ApiError(422, f"{name} has no tokens")
            if isinstance(item, list) and "" in item:  # tokenizers never make one
                raise ApiError(422, f"{name}[{item.index('')}] is an empty token: a token has "
                               "at least one character (as `elmo embed` splits its lines on "
                               "whitespace); leave it out")
            if len(tokens) > max_tokens:
                if cut is None:
                    hint = ', or send "truncate": true' if tei is not None else ""
                    raise ApiError(413, f"{name} has {len(tokens)} tokens, more than the "
                                   f"server's --max-input-tokens {max_tokens}: split it{hint}")
                tokens = tokens[:max_tokens] if cut == "right" else tokens[-max_tokens:]
            sentences.append(tokens)
        return sentences

    def check_dimensions(self, dimensions: int | None) -> None:
        """422 for a request's `dimensions` other than the model's: ELMo's vectors were not
        trained to be shortened (OpenAI's text-embedding-3 models were)."""
        dims = self.ready().model.config.output_dim
        if dimensions is not None and dimensions != dims:
            raise ApiError(422, f"dimensions: this model's vectors have {dims} dimensions and "
                           "cannot be shortened (it was not trained for it, as OpenAI's "
                           f"text-embedding-3 models were): leave dimensions out or give {dims}")

    def checked_layers(self, choice: LayerChoice) -> LayerChoice:
        """A request's layer choice; 422 where it does not fit the model."""
        try:
            choice.check(self.ready().model.num_layers)
        except LayerChoiceError as err:
            raise ApiError(422, f"layers: {err}") from None
        return choice

    async def embed(self, request: Request, sentences: list[list[str]]) -> list[np.ndarray]:
        """Each sentence's layers (L+1, n, 2P) through the queue; 429 when too many requests
        are in flight; ClientGone (and its place freed) if the client leaves meanwhile."""
        self.ready()
        if self.in_flight >= self.limits.max_concurrent_requests:
            raise ApiError(429, f"the server is busy: {self.in_flight} requests in flight "
                           f"(--max-concurrent-requests): retry later", "Overloaded")
        self.in_flight += 1
        work = asyncio.ensure_future(self.queue.embed(sentences))
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                raise ClientGone
            if isinstance(work.exception(), DeviceMemoryError):  # one input too long for it
                raise ApiError(413, str(work.exception()))
            if work.exception() is not None:  # the model failed: the log has the traceback
                logger.error("embedding failed", exc_info=work.exception())
                raise ApiError(500, f"embedding failed ({type(work.exception()).__name__}); "
                               "the server's log has the details", "Backend")
            return work.result()
        finally:
            work.cancel()
            gone.cancel()
            self.in_flight -= 1

    def info(self) -> dict:
        embedder, limits = self.embedder, self.limits
        config = embedder.model.config if embedder is not None else None
        tokenizer = embedder.tokenizer if embedder is not None else None
        if tokenizer is not None and not isinstance(tokenizer, str):
            tokenizer = type(tokenizer).__name__  # a callable given to the Embedder
        return {
            "model": self.model_name,
            "format": self.model_format,
            "version": __version__,
            "ready": embedder is not None,
            "layers": None if config is None else config.n_layers + 1,
            "dims": None if config is None else config.output_dim,
            "default_layers": self.settings.layers,
            "tokenizer": tokenizer,
            "device": None if embedder is None else str(embedder.device),
            "quantize": None if embedder is None else embedder.model.quantization,
            "precision": None if embedder is None else embedder.precision,
            "limits": asdict(limits),
        }


def _refuse_lone_surrogates(name: str, item: Input) -> None:
    """422 for a lone UTF-16 surrogate in an input: no character, and not writable as UTF-8
    (JSON's "\\ud800" escape makes one; a client that cut a string between the two halves
    of an emoji's pair sends it)."""
    texts = [(name, item)] if isinstance(item, str) else \
        [(f"{name}[{j}]", token) for j, token in enumerate(item)]
    for where, text in texts:
        at = lone_surrogate(text)
        if at is not None:
            raise ApiError(422, f"{where} holds a lone surrogate (\\u{ord(text[at]):04x}) at "
                           f"character {at}: half of a UTF-16 pair, not a character; send "
                           "whole characters")


async def _disconnected(request: Request) -> None:
    """Returns when the client closes its connection (the body has been read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _json(data: object, status: int = 200) -> Response:
    """orjson writes numpy arrays directly, 15 times faster than json on lists of floats."""
    return Response(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY), status,
                    media_type="application/json")


def _error(request: Request, status: int, message: str, error_type: str,
           headers: dict[str, str] | None = None) -> Response:
    """TEI's error body; OpenAI's on its routes, as its clients read `error.message`."""
    if request.url.path.startswith("/v1/"):
        body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    else:
        body = {"error": message, "error_type": error_type}
    answer = _json(body, status)
    answer.headers.update(headers or {})
    return answer


def _pooled(layers: list[np.ndarray], mode: str | LayerChoice, normalize: bool
            ) -> list[np.ndarray]:
    """One vector (2P,) per sentence: the mean over its tokens of what the choice `mode`
    keeps."""
    choice = parse_layer_choice(mode)
    vectors = [choice.numpy(a).mean(axis=0) for a in layers]
    if normalize:
        vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in vectors]
    return vectors


def _tokens(text: Input, tokens: list[str], special: bool) -> list[Token]:
    """TEI's token objects, with character offsets where a token is found in `text`."""
    found, position = [], 0
    for token in tokens:
        start = text.find(token, position) if isinstance(text, str) else -1
        if start >= 0:
            position = start + len(token)
            found.append(Token(text=token, start=start, stop=position))
        else:
            found.append(Token(text=token))
    if special:
        found = [Token(text="<S>", special=True), *found, Token(text="</S>", special=True)]
    return found


# ---- the routes: each one checks its request, embeds through the service, writes its answer --


async def _service(request: Request) -> Service:
    """The app's Service (async: FastAPI runs it on the event loop, not in a thread)."""
    return request.app.state.service


AppService = Annotated[Service, Depends(_service)]
router = APIRouter()


@router.post("/embed_all", response_model=None, responses=_answers(
    list[LayerVectors] | list[TokenVectors], "each input's token vectors", TEI_ERRORS,
    binary=True))
async def embed_all(body: EmbedAllRequest, request: Request, service: AppService) -> Response:
    """Token vectors of each input: (L+1, n, 2P) for layers "all", else (n, 2P). With
    `Accept: application/octet-stream`, safetensors bytes with one tensor per input,
    named by its index."""
    sentences = await service.sentences(body.inputs, "inputs", tei=body)
    asked = body.layer_choice()
    choice = service.checked_layers(asked) if asked else service.settings.layer_choice
    mode = asked.spelling() if asked else str(service.settings.layers)
    layers = await service.embed(request, sentences)
    binary = BINARY in request.headers.get("accept", "")
    return await asyncio.to_thread(_layers_answer, layers, choice, mode, binary)


def _layers_answer(layers: list[np.ndarray], choice: LayerChoice, mode: str,
                   binary: bool) -> Response:
    """`/embed_all`'s answer: each input's layers as `choice` keeps them (`mode`: its
    name), as JSON or safetensors bytes."""
    arrays = [np.ascontiguousarray(choice.numpy(a)) for a in layers]
    if binary:
        tensors = {str(i): a for i, a in enumerate(arrays)}
        return Response(safetensors_bytes(tensors, {"layers": mode}), media_type=BINARY)
    return _json(arrays)


@router.post("/", response_model=None, responses=_answers(
    list[Vector], "one vector per input (TEI's default route: /embed)", TEI_ERRORS))
@router.post("/embed", response_model=None, responses=_answers(
    list[Vector], "one vector per input", TEI_ERRORS))
async def embed(body: EmbedRequest, request: Request, service: AppService) -> Response:
    """One vector per input: the mean over its tokens of the layer average (or top),
    L2-normalized unless `normalize` is false. `POST /` is the same, as in TEI."""
    service.check_dimensions(body.dimensions)
    choice = service.checked_layers(body.layer_choice())
    sentences = await service.sentences(body.inputs, "inputs", tei=body)
    layers = await service.embed(request, sentences)
    vectors = await asyncio.to_thread(_pooled, layers, choice, body.normalize)
    return _json(vectors)


@router.post("/v1/embeddings", response_model=None, responses=_answers(
    OpenAIEmbeddingResponse, "OpenAI's embeddings answer",
    error_responses(OpenAIErrorResponse)))
async def openai_embeddings(body: OpenAIEmbeddingRequest, request: Request,
                            service: AppService) -> Response:
    """OpenAI's embeddings API: `/embed`'s normalized vectors, as floats or as base64 of
    little-endian float32."""
    if body.holds_token_ids():
        raise ApiError(422, "input holds token ids: this model reads characters and has no "
                       "token ids, so send the text. (LangChain's OpenAIEmbeddings sends "
                       "tiktoken ids unless made with check_embedding_ctx_length=False.)")
    service.check_dimensions(body.dimensions)
    sentences = await service.sentences(body.input, "input")
    layers = await service.embed(request, sentences)
    vectors = await asyncio.to_thread(_pooled, layers, "average", True)
    if body.encoding_format == "base64":
        vectors = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
    n_tokens = sum(len(s) for s in sentences)
    return _json({
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v}
                 for i, v in enumerate(vectors)],
        "model": service.model_name,
        "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
    })


@router.post("/tokenize", response_model=None, responses=_answers(
    list[list[Token]], "each input's tokens", TEI_ERRORS))
async def tokenize(body: TokenizeRequest, service: AppService) -> Response:
    """How each input is split: TEI's token objects (`id` null: there is no vocabulary
    of ids). The tokens, without the special ones, are those `/embed_all` returns; the
    limits are `/embed_all`'s (an input of more than --max-input-tokens tokens: 413)."""
    sentences = await service.sentences(body.inputs, "inputs")
    return await asyncio.to_thread(_tokens_answer, as_list(body.inputs), sentences,
                                   body.add_special_tokens)


def _tokens_answer(items: list[Input], sentences: list[list[str]], special: bool) -> Response:
    """`/tokenize`'s answer: the token objects of each input."""
    return _json([[t.model_dump() for t in _tokens(x, s, special)]
                  for x, s in zip(items, sentences, strict=True)])


@router.get("/info", response_model=None, responses=_answers(dict[str, object], "the model"))
async def info(service: AppService) -> Response:
    """The model, its layers and width, the tokenizer, the limits and the version."""
    return _json(service.info())


HEALTH_ANSWERS = _answers(Health, "the model is ready",
                          {503: {"model": Health, "description": "it is loading"}})


@router.get("/", response_model=None, responses=HEALTH_ANSWERS)
@router.get("/health", response_model=None, responses=HEALTH_ANSWERS)
async def health(service: AppService) -> Response:
    """200 once the model is loaded; 503 while it loads (or if it failed to). `GET /`
    is the same, as in TEI."""
    if service.embedder is not None:
        return _json({"status": "ok"})
    return _json({"status": "failed" if service.failure else "loading",
                  "error": service.failure}, 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics_text(service: AppService) -> Response:
    """Prometheus text format."""
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


# ---- errors: every answer other than 200 is a JSON body with a one-line message -----------


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
    """The app: `router`'s routes over a Service; `load()` builds the Embedder in a thread
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
    app.include_router(router)
    app.add_middleware(PayloadLimit, limit=limits.payload_limit)
    app.add_middleware(BodyTimeout, seconds=limits.body_timeout)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics,
                       routes=[route.path for route in router.routes])
    return app
