"""The Service of `elmo serve`: the model, its batching queue and the counters that the routes
share, and the errors the routes answer with (`ApiError`, `ClientGone`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict

import numpy as np
from fastapi import Request

from elmo import __version__
from elmo.embedding import Embedder, EmbedSettings
from elmo.layer_choice import LayerChoice, LayerChoiceError
from elmo.memory import DeviceMemoryError
from elmo.serve.batching import BatchQueue
from elmo.serve.limits import ServeLimits
from elmo.serve.metrics import Metrics
from elmo.serve.schemas import Input, TeiRequest, as_list, lone_surrogate
from elmo.tokenize import Tokenizer, get_tokenizer

logger = logging.getLogger("elmo.serve")


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
