"""Request bodies of `elmo serve` (pydantic) and the one-line messages of their errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

# One input: a string (split by the model's tokenizer) or a list of tokens taken as they are.
Input = str | list[str]
Inputs = str | list[Input]


class _Request(BaseModel):
    # Unknown fields are ignored, as TEI and OpenAI clients send some of their own.
    model_config = ConfigDict(extra="ignore")


class EmbedAllRequest(_Request):
    """`POST /embed_all`: token vectors; `layers` defaults to the server's --layers."""

    inputs: Inputs
    layers: Literal["all", "top", "average"] | None = None


class EmbedRequest(_Request):
    """`POST /embed`: one vector per input, the mean over its tokens of `layers`."""

    inputs: Inputs
    normalize: bool = True
    layers: Literal["average", "top"] = "average"


class OpenAIEmbeddingRequest(_Request):
    """`POST /v1/embeddings`, as OpenAI's API takes it (token-id inputs are not supported:
    this model reads characters)."""

    input: str | list[str]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"


class TokenizeRequest(_Request):
    """`POST /tokenize`: how the server splits each input; `add_special_tokens` adds the
    sentence boundaries `<S>` and `</S>` that the biLM reads (they get no vectors)."""

    inputs: Inputs
    add_special_tokens: bool = False


class Token(BaseModel):
    """One token of `/tokenize`, in TEI's shape; this model has no token ids (it reads
    characters), so `id` is null. `start`/`stop`: character offsets in the input string,
    null where the tokenizer changed the text or the input was pre-tokenized."""

    id: int | None = None
    text: str
    special: bool = False
    start: int | None = None
    stop: int | None = None


def as_list(inputs: Inputs) -> list[Input]:
    """A single string -> a list of one input."""
    return [inputs] if isinstance(inputs, str) else list(inputs)


FIELD_NAMES = frozenset(
    name for model in (EmbedAllRequest, EmbedRequest, OpenAIEmbeddingRequest, TokenizeRequest)
    for name in model.model_fields
)


def describe_validation_errors(errors: Sequence[dict[str, Any]]) -> str:
    """Pydantic's errors -> one line naming the field, e.g. `inputs[2]: Input should be a
    valid string, or Input should be a valid list`. Only the most specific errors are kept
    (an input that is neither a string nor a list fails both ways)."""
    by_path: dict[str, list[str]] = {}
    depth: dict[str, int] = {}
    for error in errors:
        if error.get("type") == "json_invalid":
            reason = error.get("ctx", {}).get("error", "invalid JSON")
            return f"the body is not valid JSON: {reason} at character {error['loc'][-1]}"
        path, parts = _field_path(error.get("loc", ()))
        by_path.setdefault(path, [])
        if error["msg"] not in by_path[path]:
            by_path[path].append(error["msg"])
        depth[path] = max(depth.get(path, 0), parts)
    deepest = max(depth.values(), default=0)
    lines = [f"{path or 'the body'}: {', or '.join(messages)}"
             for path, messages in by_path.items() if depth[path] == deepest]
    return "; ".join(lines[:3])


def _field_path(loc: Sequence[Any]) -> tuple[str, int]:
    """('body', 'inputs', 'list[...]', 2, 'str') -> ('inputs[2]', 2): field names and
    indices, without the union members pydantic names on the way."""
    path, parts = "", 0
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in FIELD_NAMES:
            path += f".{part}" if path else part
        else:
            continue
        parts += 1
    return path, parts
