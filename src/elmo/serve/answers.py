"""What the routes of `elmo serve` share: the app's Service as a dependency, JSON answers
(orjson), the OpenAPI description of a route's answers, pooled sentence vectors."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import orjson
from fastapi import Depends, Request
from fastapi.responses import Response

from elmo.layer_choice import LayerChoice, parse_layer_choice
from elmo.serve.schemas import ErrorResponse, OpenAIErrorResponse, error_responses
from elmo.serve.service import Service

BINARY = "application/octet-stream"  # /embed_all's safetensors answer
TEI_ERRORS = error_responses(ErrorResponse)
OPENAI_ERRORS = error_responses(OpenAIErrorResponse)


def answers(model: object, description: str, errors: dict | None = None,
             binary: bool = False) -> dict:
    """`responses=` of a route, for its OpenAPI schema: its JSON answer (`model`), also
    safetensors bytes if `binary`, and its errors."""
    answer = {"model": model, "description": description}
    if binary:
        answer["content"] = {BINARY: {"schema": {"type": "string", "format": "binary"}}}
    return {200: answer, **(errors or {})}


def json_response(data: object, status: int = 200) -> Response:
    """orjson writes numpy arrays directly, 15 times faster than json on lists of floats."""
    return Response(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY), status,
                    media_type="application/json")


def pooled(layers: list[np.ndarray], mode: str | LayerChoice, normalize: bool
            ) -> list[np.ndarray]:
    """One vector (2P,) per sentence: the mean over its tokens of what the choice `mode`
    keeps."""
    choice = parse_layer_choice(mode)
    vectors = [choice.numpy(a).mean(axis=0) for a in layers]
    if normalize:
        vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in vectors]
    return vectors


async def _service(request: Request) -> Service:
    """The app's Service (async: FastAPI runs it on the event loop, not in a thread)."""
    return request.app.state.service


AppService = Annotated[Service, Depends(_service)]
