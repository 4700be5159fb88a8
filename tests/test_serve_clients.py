"""`elmo serve` called by the clients people use, over real HTTP on 127.0.0.1: OpenAI's
`openai`, huggingface_hub's `InferenceClient`, LangChain's `OpenAIEmbeddings`; and fuzzed from
its own OpenAPI schema with schemathesis. Nothing here reaches beyond 127.0.0.1."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("fastapi")  # the serve extra
openai = pytest.importorskip("openai")  # the dev extra holds the clients

import schemathesis  # noqa: E402
from huggingface_hub import InferenceClient  # noqa: E402
from huggingface_hub.errors import HfHubHTTPError  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from elmo.serve.app import create_app  # noqa: E402
from elmo.serve.limits import ServeLimits  # noqa: E402
from tests.helpers.serving import Client, reference, serving, wait_for  # noqa: E402

TEXTS = ["the cat sat on the mat .", "a bank of the river", "北京 欢迎 你"]
DIMS = 32  # random_bilm's vectors
LIMITS = ServeLimits(max_client_batch_size=8, max_input_tokens=50, max_batch_tokens=512,
                     payload_limit=100_000)


def pooled(texts: list[str], normalize: bool = True) -> np.ndarray:
    """What `/embed` computes, in process: each text's token mean of the layer average."""
    vectors = np.stack([a.mean(axis=0).mean(axis=0)
                        for a in reference([t.split() for t in texts])])
    if normalize:
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(limits=LIMITS) as url:
        client = Client(url)
        wait_for(lambda: client.get("/health")[0] == 200, "the model to load")
        client.close()
        yield url


# ---- openai ------------------------------------------------------------------------------


@pytest.fixture
def openai_client(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30)


def test_openai_client_float_and_base64_equal_the_embedder(openai_client):
    expected = pooled(TEXTS)
    # The client asks for base64 unless told, and then decodes it itself.
    for encoding in (openai.NOT_GIVEN, "float"):
        answer = openai_client.embeddings.create(input=TEXTS, model="default",
                                                 encoding_format=encoding)
        assert [d.index for d in answer.data] == [0, 1, 2]
        got = np.array([d.embedding for d in answer.data], dtype=np.float32)
        np.testing.assert_allclose(got, expected, atol=1e-5)
    answer = openai_client.embeddings.create(input=TEXTS, model="default",
                                             encoding_format="base64")
    got = [np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in answer.data]
    np.testing.assert_allclose(got, expected, atol=1e-5)
    single = openai_client.embeddings.create(input=TEXTS[0], model="default")
    np.testing.assert_allclose(single.data[0].embedding, expected[0], atol=1e-5)
    assert single.usage.prompt_tokens == len(TEXTS[0].split())


def test_openai_client_dimensions(openai_client):
    with pytest.raises(openai.UnprocessableEntityError, match="dimensions: this model's"):
        openai_client.embeddings.create(input="a b", model="default", dimensions=8)
    answer = openai_client.embeddings.create(input="a b", model="default", dimensions=DIMS)
    assert len(answer.data[0].embedding) == DIMS


# ---- huggingface_hub ---------------------------------------------------------------------


def test_huggingface_inference_client_at_the_base_url(url, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a call to the Hub would fail, not wait
    client = InferenceClient(url, timeout=30)
    got = client.feature_extraction(TEXTS[0])
    assert got.shape == (1, DIMS) and got.dtype == np.float32
    np.testing.assert_allclose(got[0], pooled(TEXTS[:1])[0], atol=1e-5)
    raw = client.feature_extraction(TEXTS, normalize=False)
    np.testing.assert_allclose(raw, pooled(TEXTS, normalize=False), atol=1e-5)

    words = [f"w{i}" for i in range(60)]  # --max-input-tokens 50
    with pytest.raises(HfHubHTTPError, match="truncate"):
        client.feature_extraction(" ".join(words))
    for direction, kept in (("right", words[:50]), ("left", words[10:])):
        got = client.feature_extraction(" ".join(words), truncate=True,
                                        truncation_direction=direction)
        np.testing.assert_allclose(got[0], pooled([" ".join(kept)])[0], atol=1e-5)
    with pytest.raises(HfHubHTTPError, match="prompt_name"):
        client.feature_extraction("a b", prompt_name="query")
    with pytest.raises(HfHubHTTPError, match="dimensions"):
        client.feature_extraction("a b", dimensions=8)


# ---- LangChain ---------------------------------------------------------------------------


@pytest.fixture
def local_tiktoken(monkeypatch):
    """LangChain's default path tokenizes with tiktoken, whose BPE files download on first
    use. The test's own byte-level encoding stands in (what the ids are does not matter:
    the server refuses ids), and a download attempt fails the test."""
    import tiktoken
    import tiktoken.load

    encoding = tiktoken.Encoding(name="bytes", pat_str=r"\S+|\s+",
                                 mergeable_ranks={bytes([i]): i for i in range(256)},
                                 special_tokens={})

    def no_download(path: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {path}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(tiktoken, "encoding_for_model", lambda name: encoding)
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: encoding)


def test_langchain_openai_embeddings(url, local_tiktoken):
    from langchain_openai import OpenAIEmbeddings

    options = dict(base_url=f"{url}/v1", api_key="unused", model="text-embedding-3-small",
                   max_retries=0, timeout=30)
    by_default = OpenAIEmbeddings(**options)
    with pytest.raises(openai.UnprocessableEntityError,
                       match="check_embedding_ctx_length=False"):
        by_default.embed_documents(TEXTS)

    text_in = OpenAIEmbeddings(**options, check_embedding_ctx_length=False)
    np.testing.assert_allclose(text_in.embed_documents(TEXTS), pooled(TEXTS), atol=1e-5)
    np.testing.assert_allclose(text_in.embed_query(TEXTS[1]), pooled(TEXTS)[1], atol=1e-5)


# ---- schemathesis ------------------------------------------------------------------------


# The schema the app serves at /openapi.json, built here at import (schemathesis's lazy
# from_fixture needs pytest internals that pytest 9 removed); the test checks it is the
# document the server sends. Building the app loads no model.
OPENAPI = create_app(lambda: None, limits=LIMITS).openapi()
fuzzed = schemathesis.openapi.from_dict(OPENAPI)


def test_the_fuzzed_schema_is_the_served_one(url):
    status, body = Client(url).get("/openapi.json")
    assert status == 200 and json.loads(body) == OPENAPI
    assert {"/", "/embed", "/embed_all", "/v1/embeddings", "/tokenize"} <= set(OPENAPI["paths"])


@fuzzed.parametrize()
@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_fuzz_from_the_openapi_schema(case, url):
    """Requests generated from `/openapi.json`, valid and not: never a 5xx, and every answer
    (status, content type, body) as the schema says; invalid data is refused."""
    case.call_and_validate(base_url=url, checks=[
        not_a_server_error, status_code_conformance, content_type_conformance,
        response_schema_conformance, negative_data_rejection])
