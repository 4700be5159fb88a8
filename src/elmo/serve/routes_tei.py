"""TEI's routes of `elmo serve` (text-embeddings-inference): `/embed_all`, `/embed` (and
`POST /`), `/tokenize`, `/info`, `/health` (and `GET /`), `/metrics`."""

from __future__ import annotations

import asyncio

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from safetensors.numpy import save as safetensors_bytes

from elmo.layer_choice import LayerChoice
from elmo.serve.answers import BINARY, TEI_ERRORS, AppService, answers, json_response, pooled
from elmo.serve.schemas import (
    EmbedAllRequest,
    EmbedRequest,
    Health,
    Input,
    LayerVectors,
    Token,
    TokenizeRequest,
    TokenVectors,
    Vector,
    as_list,
)

router = APIRouter()


@router.post("/embed_all", response_model=None, responses=answers(
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
    return json_response(arrays)


@router.post("/", response_model=None, responses=answers(
    list[Vector], "one vector per input (TEI's default route: /embed)", TEI_ERRORS))
@router.post("/embed", response_model=None, responses=answers(
    list[Vector], "one vector per input", TEI_ERRORS))
async def embed(body: EmbedRequest, request: Request, service: AppService) -> Response:
    """One vector per input: the mean over its tokens of the layer average (or top),
    L2-normalized unless `normalize` is false. `POST /` is the same, as in TEI."""
    service.check_dimensions(body.dimensions)
    choice = service.checked_layers(body.layer_choice())
    sentences = await service.sentences(body.inputs, "inputs", tei=body)
    layers = await service.embed(request, sentences)
    vectors = await asyncio.to_thread(pooled, layers, choice, body.normalize)
    return json_response(vectors)


@router.post("/tokenize", response_model=None, responses=answers(
    list[list[Token]], "each input's tokens", TEI_ERRORS))
async def tokenize(body: TokenizeRequest, service: AppService) -> Response:
    """How each input is split: TEI's token objects (`id` null: there is no vocabulary
    of ids). The tokens, without the special ones, are those `/embed_all` returns; the
    limits are `/embed_all`'s (an input of more than --max-input-tokens tokens: 413)."""
    sentences = await service.sentences(body.inputs, "inputs")
    return await asyncio.to_thread(_tokens_answer, as_list(body.inputs), sentences,
                                   body.add_special_tokens)


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


def _tokens_answer(items: list[Input], sentences: list[list[str]], special: bool) -> Response:
    """`/tokenize`'s answer: the token objects of each input."""
    return json_response([[t.model_dump() for t in _tokens(x, s, special)]
                  for x, s in zip(items, sentences, strict=True)])


@router.get("/info", response_model=None, responses=answers(dict[str, object], "the model"))
async def info(service: AppService) -> Response:
    """The model, its layers and width, the tokenizer, the limits and the version."""
    return json_response(service.info())


HEALTH_ANSWERS = answers(Health, "the model is ready",
                          {503: {"model": Health, "description": "it is loading"}})


@router.get("/", response_model=None, responses=HEALTH_ANSWERS)
@router.get("/health", response_model=None, responses=HEALTH_ANSWERS)
async def health(service: AppService) -> Response:
    """200 once the model is loaded; 503 while it loads (or if it failed to). `GET /`
    is the same, as in TEI."""
    if service.embedder is not None:
        return json_response({"status": "ok"})
    return json_response({"status": "failed" if service.failure else "loading",
                  "error": service.failure}, 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics_text(service: AppService) -> Response:
    """Prometheus text format."""
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


# ---- errors: every answer other than 200 is a JSON body with a one-line message -----------
