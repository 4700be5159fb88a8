"""OpenAI's embeddings route of `elmo serve`: `/v1/embeddings`."""

from __future__ import annotations

import asyncio
import base64

from fastapi import APIRouter, Request
from fastapi.responses import Response

from elmo.serve.answers import OPENAI_ERRORS, AppService, answers, json_response, pooled
from elmo.serve.schemas import OpenAIEmbeddingRequest, OpenAIEmbeddingResponse
from elmo.serve.service import ApiError

router = APIRouter()


@router.post("/v1/embeddings", response_model=None, responses=answers(
    OpenAIEmbeddingResponse, "OpenAI's embeddings answer",
    OPENAI_ERRORS))
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
    vectors = await asyncio.to_thread(pooled, layers, "average", True)
    if body.encoding_format == "base64":
        vectors = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
    n_tokens = sum(len(s) for s in sentences)
    return json_response({
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v}
                 for i, v in enumerate(vectors)],
        "model": service.model_name,
        "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
    })
