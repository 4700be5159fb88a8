"""Request bodies of `elmo serve` (pydantic) and the one-line messages of their errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

from elmo.layer_choice import LayerChoice, forms, parse_layer_choice

# One input: a string (split by the model's tokenizer) or a list of tokens taken as they are.
Input = str | list[str]
Inputs = str | list[Input]


class _Request(BaseModel):
    # Unknown fields are ignored, as TEI and OpenAI clients send some of their own. Booleans
    # are strict: "yes" or 1 is refused, not read as true.
    model_config = ConfigDict(extra="ignore")


class TeiRequest(_Request):
    """What `/embed_all`, `/embed` and `/` share, as TEI defines it: `truncate` cuts an input
    longer than --max-input-tokens to its first (`truncation_direction` "right") or last
    ("left") tokens instead of refusing it; `prompt_name` is refused (ELMo has no prompts)."""

    inputs: Inputs
    truncate: StrictBool | None = None
    truncation_direction: Literal["right", "left", "Right", "Left"] = "right"
    prompt_name: str | None = None

    def cut(self) -> Literal["right", "left"] | None:
        """Where an input too long is cut, or None to refuse it."""
        if not self.truncate:
            return None
        return "left" if self.truncation_direction in ("left", "Left") else "right"


# A request's layer choice (`elmo.layer_choice`): a spelling, a layer number, or a learned
# mix's weights (a request names no file of the server).
Layers = StrictStr | StrictInt | list[StrictInt | StrictFloat]


class EmbedAllRequest(TeiRequest):
    """`POST /embed_all`: token vectors; `layers` defaults to the server's --layers."""

    layers: Layers | None = None

    @field_validator("layers")
    @classmethod
    def _a_choice(cls, layers: Layers | None) -> Layers | None:
        if layers is not None:
            parse_layer_choice(layers, files=False)  # a LayerChoiceError (ValueError) names it
        return layers

    def layer_choice(self) -> LayerChoice | None:
        """What is kept of each input's layers, None where the server's --layers decides."""
        return None if self.layers is None else parse_layer_choice(self.layers, files=False)


class EmbedRequest(TeiRequest):
    """`POST /embed` (and `POST /`, as TEI): one vector per input, the mean over its tokens
    of `layers` (a choice of one vector per token), L2-normalized unless `normalize` is
    false."""

    normalize: StrictBool = True
    layers: Layers = "average"
    dimensions: int | None = None  # refused unless the model's (TEI shortens Matryoshka ones)

    @field_validator("layers")
    @classmethod
    def _one_vector_per_token(cls, layers: Layers) -> Layers:
        if parse_layer_choice(layers, files=False).stacked:
            raise ValueError(f"{layers!r} keeps the layer axis; give a choice of one vector "
                             f"per token ({forms(files=False)})")
        return layers

    def layer_choice(self) -> LayerChoice:
        """What is averaged over each input's tokens."""
        return parse_layer_choice(self.layers, files=False)


class OpenAIEmbeddingRequest(_Request):
    """`POST /v1/embeddings`, as OpenAI's API takes it. Token ids (OpenAI's other input
    types) are in the schema so that they are refused with a message: this model reads
    characters. `dimensions` other than the model's is refused too."""

    input: str | list[str] | list[int] | list[list[int]]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None

    def holds_token_ids(self) -> bool:
        return isinstance(self.input, list) and any(not isinstance(x, str) for x in self.input)


class TokenizeRequest(_Request):
    """`POST /tokenize`: how the server splits each input; `add_special_tokens` adds the
    sentence boundaries `<S>` and `</S>` that the biLM reads (they get no vectors)."""

    inputs: Inputs
    add_special_tokens: StrictBool = False


class Token(BaseModel):
    """One token of `/tokenize`, in TEI's shape; this model has no token ids (it reads
    characters), so `id` is null. `start`/`stop`: character offsets in the input string,
    null where the tokenizer changed the text or the input was pre-tokenized."""

    id: int | None = None
    text: str
    special: bool = False
    start: int | None = None
    stop: int | None = None


# ---- answers, as the OpenAPI schema describes them --------------------------------------

Vector = list[float]
TokenVectors = list[list[float]]  # (n, 2P): layers "top" or "average"
LayerVectors = list[list[list[float]]]  # (L+1, n, 2P): layers "all"


class OpenAIEmbedding(BaseModel):
    object: Literal["embedding"]
    index: int
    embedding: Vector | str  # str: base64 of little-endian float32


class OpenAIUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class OpenAIEmbeddingResponse(BaseModel):
    object: Literal["list"]
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIUsage


class Health(BaseModel):
    status: Literal["ok", "loading", "failed"]
    error: str | None = None


class ErrorResponse(BaseModel):
    """TEI's error body."""

    error: str
    error_type: str


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorResponse(BaseModel):
    """OpenAI's error body, on `/v1/` routes."""

    error: OpenAIError


ERROR_STATUSES = {
    408: "the body did not arrive within --body-timeout seconds (the connection is closed)",
    413: "too many inputs, an input too long, or a body over --payload-limit",
    422: "a body that is not JSON or not a valid request (the message names the field)",
    429: "too many requests in flight: retry later or elsewhere",
    500: "the model failed on this request (the server's log has the traceback)",
    503: "the model is still loading, or --max-connections connections are open",
}


def error_responses(body: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route that embeds, for `responses=` of its decorator."""
    return {status: {"model": body, "description": why} for status, why in ERROR_STATUSES.items()}


# ---- inputs ------------------------------------------------------------------------------


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


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone UTF-16 surrogate in `text`, or None. JSON's `"\\ud800"`
    escape decodes to one: half of a pair, no character, and not writable as UTF-8."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def describe_unparsable_body(error: BaseException | None) -> str:
    """Why FastAPI could not read a body as JSON (it answers 400 "There was an error parsing
    the body" with this as the cause), in one line with the fix."""
    if isinstance(error, UnicodeDecodeError):
        return (f"the body is not UTF-8: byte 0x{error.object[error.start]:02x} at position "
                f"{error.start} ({error.reason}); send the JSON encoded as UTF-8")
    if isinstance(error, RecursionError):
        return ("the body nests JSON arrays or objects too deeply to parse; a request nests "
                "at most 2 levels (a list of token lists)")
    return f"the body is not JSON this server can read ({error}); send a request as the docs show"
