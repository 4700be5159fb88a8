"""`elmo serve` over real HTTP on 127.0.0.1: every route, vectors equal to the Embedder's,
concurrent clients batched together, each error code, disconnects, SIGTERM."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")  # the serve extra

from safetensors.numpy import load as load_safetensors  # noqa: E402

from elmo import save_pretrained  # noqa: E402
from elmo.cli import main  # noqa: E402
from elmo.embed import Embedder  # noqa: E402
from elmo.serve.app import create_app  # noqa: E402
from elmo.serve.limits import ServeLimits  # noqa: E402
from elmo.serve.server import bind  # noqa: E402
from tests.conftest import REPO, random_bilm  # noqa: E402
from tests.helpers.serving import (  # noqa: E402
    TIMEOUT,
    Client,
    GatedEmbedder,
    reference,
    serving,
    wait_for,
)

SENTENCES = ["the cat sat on the mat .", "北京 欢迎 你", "a", "bank of the river"]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, GatedEmbedder]]:
    """One server for the tests that only read (the app is ready when /health says so)."""
    embedder = GatedEmbedder(random_bilm())
    with serving(embedder, limits=ServeLimits(max_client_batch_size=8, max_input_tokens=50,
                                              max_batch_tokens=512)) as url:
        client = Client(url)
        wait_for(lambda: client.get("/health")[0] == 200, "the model to load")
        client.close()
        yield url, embedder


@pytest.fixture
def client(served) -> Iterator[Client]:
    c = Client(served[0])
    yield c
    c.close()


def metric(client: Client, name: str) -> float:
    """A metric's value (the sum over its labels)."""
    text = client.get("/metrics")[1].decode()
    values = re.findall(rf"^{re.escape(name)}(?:{{.*}})? (\S+)$", text, re.MULTILINE)
    return sum(float(v) for v in values)


# ---- routes ------------------------------------------------------------------------------


def test_health_is_503_while_the_model_loads_then_200():
    loaded = threading.Event()
    embedder = GatedEmbedder(random_bilm())

    def slow_load():
        assert loaded.wait(TIMEOUT)
        return embedder

    with serving(embedder, load=slow_load) as url:
        client = Client(url)
        status, body = client.get("/health")
        assert status == 503 and json.loads(body)["status"] == "loading"
        status, body = client.post("/embed", {"inputs": "a b"})
        assert status == 503 and "loading" in body["error"]
        assert client.get("/info")[0] == 200  # what is known already
        loaded.set()
        wait_for(lambda: client.get("/health")[0] == 200, "/health to answer 200")
        assert client.post("/embed", {"inputs": "a b"})[0] == 200


@pytest.mark.parametrize("layers", ["all", "top", "average", "sum"])
def test_embed_all_equals_the_embedder(client, layers):
    tokens = [s.split() for s in SENTENCES]
    inputs = [SENTENCES[0], tokens[1], SENTENCES[2], tokens[3]]  # strings and token lists
    status, body = client.post("/embed_all", {"inputs": inputs, "layers": layers})
    assert status == 200 and len(body) == len(SENTENCES)
    for got, expected in zip(body, reference(tokens), strict=True):
        if layers == "top":
            expected = expected[-1]
        elif layers == "average":
            expected = expected.mean(axis=0)
        elif layers == "sum":
            expected = expected.sum(axis=0)
        np.testing.assert_allclose(np.array(got, dtype=np.float32), expected, atol=1e-5)


def test_embed_all_binary_answer_equals_json(client):
    body = {"inputs": SENTENCES}
    status, headers, data = client.request("POST", "/embed_all", body,
                                           headers={"Accept": "application/octet-stream"})
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    tensors = load_safetensors(data)
    as_json = client.post("/embed_all", body)[1]
    assert sorted(tensors) == [str(i) for i in range(len(SENTENCES))]
    for i, expected in enumerate(reference([s.split() for s in SENTENCES])):
        assert tensors[str(i)].dtype == np.float32 and tensors[str(i)].shape == expected.shape
        np.testing.assert_allclose(tensors[str(i)], expected, atol=1e-5)
        np.testing.assert_array_equal(tensors[str(i)], np.array(as_json[i], dtype=np.float32))


def test_embed_pools_the_layer_average(client):
    expected = [a.mean(axis=0).mean(axis=0) for a in reference([s.split() for s in SENTENCES])]
    status, raw = client.post("/embed", {"inputs": SENTENCES, "normalize": False})
    assert status == 200
    np.testing.assert_allclose(np.array(raw), np.stack(expected), atol=1e-5)
    status, unit = client.post("/embed", {"inputs": SENTENCES[0]})  # normalize by default
    assert status == 200 and len(unit) == 1
    np.testing.assert_allclose(unit[0], expected[0] / np.linalg.norm(expected[0]), atol=1e-5)
    top = client.post("/embed", {"inputs": SENTENCES[0], "layers": "top", "normalize": False})[1]
    np.testing.assert_allclose(top[0], reference([SENTENCES[0].split()])[0][-1].mean(axis=0),
                               atol=1e-5)


LAYER_CHOICES = {  # a request's layers -> what it keeps of (L+1, n, D), as `elmo embed`
    "concat": lambda a: np.concatenate(list(a), axis=-1),
    "1": lambda a: a[1],
    2: lambda a: a[2],
    "[0.2, 0.3, 0.5]": lambda a: 0.2 * a[0] + 0.3 * a[1] + 0.5 * a[2],
}


@pytest.mark.parametrize("layers", list(LAYER_CHOICES))
def test_a_request_takes_the_layer_choices_of_elmo_embed(client, layers):
    keep = LAYER_CHOICES[layers]
    asked = json.loads(layers) if str(layers).startswith("[") else layers  # a mix's weights
    expected = [keep(a) for a in reference([s.split() for s in SENTENCES])]
    status, body = client.post("/embed_all", {"inputs": SENTENCES, "layers": asked})
    assert status == 200
    for got, want in zip(body, expected, strict=True):
        np.testing.assert_allclose(np.array(got, dtype=np.float32), want, atol=1e-5)
    status, pooled = client.post("/embed", {"inputs": SENTENCES, "layers": asked,
                                            "normalize": False})
    assert status == 200
    np.testing.assert_allclose(np.array(pooled), np.stack([w.mean(axis=0) for w in expected]),
                               atol=1e-5)


def test_a_request_names_no_file_of_the_server(client, tmp_path):
    (tmp_path / "layer_weights.json").write_text('{"input": [0.2, 0.3, 0.5]}')
    status, answer = client.post("/embed_all", {"inputs": "a", "layers": str(tmp_path)})
    assert status == 422 and "RUN's weights" in answer["error"], answer


@pytest.mark.parametrize(("route", "layers", "message"), [
    ("/embed_all", 7, "layers=7: the model has layers 0 to 2"),
    ("/embed", [0.5, 0.5], "its mix weighs 2 layers, but the model has 3"),
    ("/embed_all", True, "layers"),
    ("/embed_all", "middle", "layers must be one of all, top"),
])
def test_a_layer_choice_that_does_not_fit_gets_422(client, route, layers, message):
    status, answer = client.post(route, {"inputs": "a", "layers": layers})
    assert status == 422 and message in answer["error"], answer
    assert "Traceback" not in answer["error"]


def test_openai_embeddings_float_and_base64(client):
    status, floats = client.post("/v1/embeddings", {"input": SENTENCES[:2], "model": "x"})
    assert status == 200
    assert floats["object"] == "list" and floats["model"] == "default"
    assert [(d["object"], d["index"]) for d in floats["data"]] == [("embedding", 0),
                                                                    ("embedding", 1)]
    n_tokens = len(SENTENCES[0].split()) + len(SENTENCES[1].split())
    assert floats["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}
    embed = client.post("/embed", {"inputs": SENTENCES[:2]})[1]
    np.testing.assert_allclose([d["embedding"] for d in floats["data"]], embed, atol=1e-6)
    status, b64 = client.post("/v1/embeddings", {"input": SENTENCES[0],
                                                 "encoding_format": "base64"})
    assert status == 200 and len(b64["data"]) == 1
    decoded = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(decoded, np.array(embed[0], dtype=np.float32))


def test_tokenize_info_metrics(client):
    status, tokens = client.post("/tokenize", {"inputs": ["the  cat", ["pre", "split"]]})
    assert status == 200
    assert tokens[0] == [{"id": None, "text": "the", "special": False, "start": 0, "stop": 3},
                         {"id": None, "text": "cat", "special": False, "start": 5, "stop": 8}]
    assert [t["text"] for t in tokens[1]] == ["pre", "split"] and tokens[1][0]["start"] is None
    special = client.post("/tokenize", {"inputs": "a", "add_special_tokens": True})[1]
    assert [(t["text"], t["special"]) for t in special[0]] == [("<S>", True), ("a", False),
                                                               ("</S>", True)]
    status, info = client.get("/info")
    info = json.loads(info)
    assert status == 200 and info["ready"] and info["layers"] == 3 and info["dims"] == 32
    assert info["tokenizer"] == "whitespace" and info["limits"]["max_client_batch_size"] == 8
    assert info["quantize"] is None
    status, _, text = client.request("GET", "/metrics")
    text = text.decode()
    assert status == 200
    for name in ("elmo_requests_total", "elmo_request_duration_seconds_bucket",
                 "elmo_queue_depth", "elmo_batch_tokens_bucket", "elmo_requests_in_flight"):
        assert name in text
    assert re.search(r'elmo_requests_total\{route="/tokenize",status="200"\} [1-9]', text)


# ---- batching ----------------------------------------------------------------------------


def test_32_concurrent_clients_are_batched_and_get_their_own_vectors(served):
    url, embedder = served
    words = "the of and to in a is that for it as was with be by on".split()
    rng = np.random.default_rng(0)
    inputs = [[" ".join(rng.choice(words, size=rng.integers(1, 20)))] for _ in range(32)]
    expected = reference([x[0].split() for x in inputs])
    probe = Client(url)
    embedder.gate.clear()  # the model is busy: the 32 requests queue up meanwhile
    embedder.entered.clear()
    calls_before = len(embedder.calls)
    with ThreadPoolExecutor(33) as pool:
        first = pool.submit(Client(url).post, "/embed_all", {"inputs": "hold on"})
        assert embedder.entered.wait(TIMEOUT)
        answers = [pool.submit(Client(url).post, "/embed_all", {"inputs": x}) for x in inputs]
        wait_for(lambda: metric(probe, "elmo_queue_depth") == 32, "32 queued requests")
        embedder.gate.set()
        assert first.result()[0] == 200
        for answer, vectors in zip(answers, expected, strict=True):
            status, body = answer.result()
            assert status == 200 and len(body) == 1
            np.testing.assert_allclose(np.array(body[0], dtype=np.float32), vectors, atol=1e-5)
    calls = embedder.calls[calls_before + 1:]
    positions = [sum(len(s) + 2 for s in call) for call in calls]
    assert sum(len(call) for call in calls) == 32
    assert len(calls) < 8, "queued requests should be embedded together"
    assert max(positions) <= 512  # --max-batch-tokens
    probe.close()


# ---- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"inputs": ["a"] * 9}, 413, "--max-client-batch-size 8"),
    ({"inputs": ["a", "b " * 51]}, 413, "inputs[1] has 51 tokens"),
    ({"inputs": [["a", 3]]}, 422, "inputs[0][1]"),
    ({"inputs": []}, 422, "inputs is empty"),
    ({"inputs": ["a", "  "]}, 422, "inputs[1] has no tokens"),
    ({"text": "a"}, 422, "inputs: Field required"),
    ({"inputs": "a", "normalize": "maybe"}, 422, "normalize"),
    ({"inputs": "a", "normalize": "yes"}, 422, "normalize: Input should be a valid boolean"),
    ({"inputs": "a", "normalize": 1}, 422, "normalize: Input should be a valid boolean"),
    ({"inputs": "a", "truncate": "true"}, 422, "truncate"),
    ({"inputs": [["a", ""]]}, 422, "inputs[0][1] is an empty token"),
    ({"inputs": ["b", ["a", "c", ""]]}, 422, "inputs[1][2] is an empty token"),
    ({"inputs": "a", "layers": "all"}, 422, "layers"),
])
def test_bad_requests_name_the_field_and_the_service_goes_on(client, body, status, field):
    got, answer = client.post("/embed", body)
    assert got == status and field in answer["error"], answer
    assert "Traceback" not in answer["error"]
    assert client.post("/embed", {"inputs": "good after bad"})[0] == 200


@pytest.mark.parametrize(("body", "field"), [
    ({"inputs": [["a", ""]]}, "inputs[0][1] is an empty token"),
    ({"inputs": "a", "add_special_tokens": "yes"}, "add_special_tokens"),
])
def test_tokenize_refuses_empty_tokens_and_booleans_that_are_not(client, body, field):
    got, answer = client.post("/tokenize", body)
    assert got == 422 and field in answer["error"], answer


def test_tokenize_has_the_limits_of_the_embedding_routes(client):
    """A body under --payload-limit of a million tokens was tokenized whole and answered
    with tens of MB; now it is refused as /embed refuses it."""
    status, answer = client.post("/tokenize", {"inputs": "a " * 900_000})
    assert status == 413 and "inputs has 900000 tokens, more than the server's " \
        "--max-input-tokens 50" in answer["error"], answer
    status, answer = client.post("/tokenize", {"inputs": ["a"] * 9})
    assert status == 413 and "--max-client-batch-size 8" in answer["error"]
    assert client.post("/tokenize", {"inputs": "a " * 50})[0] == 200


class SlowTokenizer:
    """Splits on whitespace; an input holding "slow" waits for `gate` first."""

    def __init__(self) -> None:
        self.entered, self.gate = threading.Event(), threading.Event()

    def __call__(self, text: str) -> list[str]:
        if "slow" in text:
            self.entered.set()
            assert self.gate.wait(TIMEOUT)
        return text.split()


@pytest.mark.parametrize("route", ["/tokenize", "/embed", "/embed_all", "/v1/embeddings"])
def test_a_slow_tokenization_does_not_hold_health_or_other_requests(route):
    tokenizer = SlowTokenizer()
    embedder = GatedEmbedder(random_bilm(), tokenizer=tokenizer)
    with serving(embedder) as url, ThreadPoolExecutor(1) as pool:
        probe = Client(url)
        wait_for(lambda: probe.get("/health")[0] == 200, "the model to load")
        field = "input" if route.startswith("/v1/") else "inputs"
        slow = pool.submit(Client(url).post, route, {field: "a slow input"})
        try:
            assert tokenizer.entered.wait(TIMEOUT)
            probe.conn.sock.settimeout(5)  # the loop is free: answers come in milliseconds
            assert probe.get("/health")[0] == 200
            assert probe.post("/embed", {"inputs": "quick"})[0] == 200
        finally:
            tokenizer.gate.set()
        assert slow.result()[0] == 200
        probe.close()


def test_malformed_json_payload_too_large_and_openai_errors(client):
    status, _, data = client.request("POST", "/embed_all", raw=b'{"inputs": ["a"')
    assert status == 422 and "not valid JSON" in json.loads(data)["error"]
    status, _, data = client.request("POST", "/embed", raw=b'{"inputs": "a"}',
                                     headers={"Content-Type": "text/plain"})
    assert status == 422 and "Content-Type: application/json" in json.loads(data)["error"]
    status, _, data = client.request("POST", "/embed", raw=b" " * 2_000_001)
    assert status == 413
    client.close()  # the server may close a connection whose body it did not read
    status, body = client.post("/v1/embeddings", {"input": [None]})
    assert status == 422 and body["error"]["message"].startswith("input[0]")  # OpenAI's shape
    assert client.post("/v1/embeddings", {"input": "fine"})[0] == 200


@pytest.mark.parametrize(("route", "body", "field"), [
    ("/tokenize", {"inputs": "a \ud800 b"}, "inputs"),
    ("/tokenize", {"inputs": [["a", "b\udfff"]]}, "inputs[0][1]"),
    ("/embed", {"inputs": ["fine", "a \ud800 b"]}, "inputs[1]"),
    ("/embed_all", {"inputs": "a \ud800 b"}, "inputs"),
])
def test_a_lone_surrogate_is_refused_on_every_route_with_422(client, route, body, field):
    """JSON's "\\ud800" escape decodes to half of a UTF-16 pair, which is no character (and
    cannot be written back as UTF-8: /tokenize answered 500, /embed embedded it)."""
    status, answer = client.post(route, body)
    assert status == 422 and answer["error"].startswith(f"{field} holds a lone surrogate"), answer
    assert client.post(route, {"inputs": "good after bad"})[0] == 200


def test_a_body_over_the_payload_limit_gets_the_json_413_with_or_without_its_length(served):
    url = served[0]
    too_large = b'{"inputs": "' + b"a " * 1_000_000 + b'"}'  # over 2,000,000 bytes
    for headers in ({}, {"Transfer-Encoding": "chunked"}):
        client = Client(url)
        chunks = iter([too_large[:1000], too_large[1000:]]) if headers else None
        client.conn.request("POST", "/embed", chunks or too_large,
                            {"Content-Type": "application/json", **headers},
                            encode_chunked=bool(headers))
        response = client.conn.getresponse()
        assert response.status == 413 and response.getheader("content-type") == \
            "application/json", headers
        answer = json.loads(response.read())
        assert answer["error_type"] == "PayloadTooLarge"
        assert "--payload-limit 2,000,000" in answer["error"], answer
        client.close()


@pytest.mark.parametrize(("raw", "reason"), [
    (b'{"inputs": "caf\xe9"}', "not UTF-8"),          # Latin-1
    (b"[" * 5000 + b"]" * 5000, "nests"),
    (b'{"inputs": ' + b"1" * 5000 + b"}", "not JSON this server can read"),
])
def test_a_body_that_cannot_be_parsed_gets_422_naming_why(client, raw, reason):
    status, headers, data = client.request("POST", "/embed", raw=raw)
    assert status == 422 and headers["content-type"] == "application/json"
    answer = json.loads(data)
    assert reason in answer["error"] and answer["error_type"] == "Validation", answer
    assert client.post("/embed", {"inputs": "good after bad"})[0] == 200


def test_post_root_is_embed_and_get_root_is_health_as_in_tei(client):
    """huggingface_hub's InferenceClient(URL).feature_extraction posts to the URL itself."""
    body = {"inputs": SENTENCES[:2], "normalize": False}
    status, vectors = client.post("/", body)
    assert status == 200 and vectors == client.post("/embed", body)[1]
    assert client.get("/")[0] == 200


def test_truncate_keeps_the_first_or_last_tokens_as_tei(client):
    words = [f"w{i}" for i in range(60)]  # the fixture's --max-input-tokens: 50
    status, answer = client.post("/embed", {"inputs": " ".join(words)})
    assert status == 413 and '"truncate": true' in answer["error"]
    for direction, kept in (("right", words[:50]), ("Left", words[10:])):
        body = {"inputs": " ".join(words), "truncate": True, "truncation_direction": direction,
                "normalize": False}
        status, vector = client.post("/embed", body)
        assert status == 200
        expected = reference([kept])[0].mean(axis=0).mean(axis=0)
        np.testing.assert_allclose(vector[0], expected, atol=1e-5)
        status, layers = client.post("/embed_all", {**body, "layers": "top"})
        assert status == 200 and len(layers[0]) == 50
    status, answer = client.post("/embed", {"inputs": "a", "prompt_name": "query"})
    assert status == 422 and answer["error"].startswith("prompt_name"), answer


def test_openai_dimensions_other_than_the_models_are_refused_naming_the_field(client):
    status, answer = client.post("/v1/embeddings", {"input": "a b", "dimensions": 8})
    assert status == 422, answer
    assert answer["error"]["message"].startswith("dimensions: this model's vectors have 32")
    status, answer = client.post("/v1/embeddings", {"input": "a b", "dimensions": 32})
    assert status == 200 and len(answer["data"][0]["embedding"]) == 32


@pytest.mark.parametrize("ids", [[464, 6908], [[464, 6908], [64]]])
def test_openai_token_id_inputs_get_422_naming_langchains_setting(client, ids):
    """LangChain's OpenAIEmbeddings sends tiktoken ids unless told otherwise."""
    status, answer = client.post("/v1/embeddings", {"input": ids})
    assert status == 422 and "check_embedding_ctx_length=False" in answer["error"]["message"]


def test_429_when_too_many_requests_are_in_flight():
    embedder = GatedEmbedder(random_bilm())
    with serving(embedder, limits=ServeLimits(max_concurrent_requests=1)) as url, \
            ThreadPoolExecutor(1) as pool:
        client = Client(url)
        wait_for(lambda: client.get("/health")[0] == 200, "the model to load")
        embedder.gate.clear()
        embedder.entered.clear()
        first = pool.submit(Client(url).post, "/embed", {"inputs": "a"})
        assert embedder.entered.wait(TIMEOUT)
        status, body = client.post("/embed", {"inputs": "b"})
        assert status == 429 and body["error_type"] == "Overloaded"
        assert "--max-concurrent-requests" in body["error"]
        assert client.get("/health")[0] == 200  # not limited
        embedder.gate.set()
        assert first.result()[0] == 200
        assert client.post("/embed", {"inputs": "b"})[0] == 200
        assert metric(client, 'elmo_requests_total{route="/embed",status="429"}') == 1


def test_a_client_that_disconnects_frees_its_place():
    embedder = GatedEmbedder(random_bilm())
    with serving(embedder, limits=ServeLimits(max_concurrent_requests=2)) as url, \
            ThreadPoolExecutor(1) as pool:
        probe = Client(url)
        wait_for(lambda: probe.get("/health")[0] == 200, "the model to load")
        embedder.gate.clear()
        embedder.entered.clear()
        busy = pool.submit(Client(url).post, "/embed", {"inputs": "first"})
        assert embedder.entered.wait(TIMEOUT)
        leaving = Client(url)
        leaving.conn.request("POST", "/embed", json.dumps({"inputs": "gone away"}),
                             {"Content-Type": "application/json"})
        wait_for(lambda: metric(probe, "elmo_queue_depth") == 1, "the request to queue")
        assert probe.post("/embed", {"inputs": "c"})[0] == 429  # two in flight
        leaving.conn.sock.shutdown(socket.SHUT_RDWR)
        leaving.close()
        wait_for(lambda: metric(probe, "elmo_requests_in_flight") == 1, "its place to be freed")
        assert metric(probe, "elmo_queue_depth") == 0
        embedder.gate.set()
        assert busy.result()[0] == 200
        assert probe.post("/embed", {"inputs": "c"})[0] == 200
        assert ["gone", "away"] not in [s for call in embedder.calls for s in call]
        assert metric(probe, 'elmo_requests_total{route="/embed",status="499"}') == 1


def test_an_internal_error_answers_500_without_a_traceback(client, served):
    served[1].fail_next = True
    status, body = client.post("/embed", {"inputs": "a"})
    assert status == 500 and body["error_type"] == "Backend"
    assert "secret" not in body["error"] and "Traceback" not in body["error"]
    assert client.post("/embed", {"inputs": "a"})[0] == 200


# ---- the command -------------------------------------------------------------------------


def test_cli_refuses_bad_settings_without_starting(capsys):
    assert main(["serve", "no-such-model-anywhere", "--port", "0"]) == 1
    assert "no-such-model-anywhere" in capsys.readouterr().err
    assert main(["serve", "--max-input-tokens", "5000", "--port", "0"]) == 1
    assert "--max-batch-tokens" in capsys.readouterr().err
    busy = bind("127.0.0.1", 0)
    # asyncio sets TCP_NODELAY only on TCP-protocol sockets: without it keep-alive clients
    # wait 40 ms per answer (Nagle against delayed ACKs)
    assert busy.proto == socket.IPPROTO_TCP
    assert main(["serve", "--port", str(busy.getsockname()[1])]) == 1
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
    busy.close()


def test_cli_names_the_extra_when_fastapi_is_missing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # makes `import fastapi` fail
    assert main(["serve", "--port", "0"]) == 1
    assert "pip install 'elmo-bilm[serve]'" in capsys.readouterr().err


def test_cli_stops_with_the_error_when_the_model_fails_to_load(tmp_path, capsys):
    model = save_pretrained(random_bilm(), tmp_path / "model")
    (model / "model.safetensors").write_bytes(b"not safetensors")
    assert main(["serve", str(model), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "serving" in err and "elmo: error:" in err and "Traceback" not in err


def test_sigterm_finishes_the_request_in_flight_and_exits_0(tmp_path):
    model = save_pretrained(random_bilm(), tmp_path / "model")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "elmo", "serve", str(model), "--port", "0", "--threads", "1",
         "--max-input-tokens", "4000", "--max-batch-tokens", "16008"],  # 4 model calls
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        match = re.search(r"serving .* on (http://\S+)", line)
        assert match, line
        url = match.group(1)
        probe = Client(url)
        wait_for(lambda: probe.get("/health")[0] == 200, "the model to load")
        assert json.loads(probe.get("/info")[1])["format"] == "native"  # as `elmo info` says
        rng = np.random.default_rng(0)
        sentences = [list(rng.choice(["a", "bb", "ccc", "dd"], size=4000)) for _ in range(16)]
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(lambda: (Client(url).post("/embed", {"inputs": sentences,
                                                                      "normalize": False}),
                                          time.monotonic()))
            wait_for(lambda: metric(probe, "elmo_requests_in_flight") == 1, "the request")
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            time.sleep(0.2)
            with pytest.raises(ConnectionRefusedError):  # no longer accepting
                socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 5)
            (status, vectors), answered = answer.result(TIMEOUT)
        assert answered > signalled, "the request was not in flight when signalled"
        assert status == 200
        expected = [a.mean(axis=0).mean(axis=0) for a in reference(sentences)]
        np.testing.assert_allclose(np.array(vectors), np.stack(expected), atol=1e-5)
        assert proc.wait(TIMEOUT) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the docs ----------------------------------------------------------------------------


def test_the_curl_examples_of_docs_serving_answer(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    docs = (REPO / "docs" / "serving.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"^```bash\n(.*?)^```", docs, flags=re.S | re.M)
              if "curl " in b]
    assert len(blocks) >= 6
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with serving(load=lambda: Embedder.from_pretrained("default")) as url:
        client = Client(url)
        wait_for(lambda: client.get("/health")[0] == 200, "the model to load")
        for block in blocks:
            script = block.replace("curl -s ", "curl -sf ").replace("localhost:8080", url)
            done = subprocess.run(["bash", "-ec", script], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=TIMEOUT)
            assert done.returncode == 0 and done.stdout, (block, done.stderr)


def test_the_docs_error_table_lists_every_status_the_service_answers():
    docs = (REPO / "docs" / "serving.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([\d, ]+) \|", docs, flags=re.M)
    documented = {int(code) for row in rows for code in row.split(",")}
    schema = create_app(lambda: None).openapi()
    declared = {int(code) for route in schema["paths"].values() for operation in route.values()
                for code in operation["responses"]}
    # 404/405 from the router; 400 from uvicorn for what is not HTTP at all
    assert declared - {200} | {400, 404, 405} <= documented


def test_cli_help_names_every_kind_of_model(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for kind in ("efml:<lang>", "ELMoForManyLangs", "original-5.5B", "weights .hdf5"):
        assert kind in help_text


def test_an_int8_model_serves_the_int8_embedders_vectors():
    sentences = [["the", "cat", "sat"], ["a", "dog"]]
    expected = Embedder(random_bilm(), quantize="int8").embed_sentences(sentences)
    with serving(Embedder(random_bilm(), quantize="int8")) as url:
        client = Client(url)
        wait_for(lambda: client.get("/health")[0] == 200, "the model to load")
        status, body = client.post("/embed_all", {"inputs": sentences})
        assert status == 200
        for got, want in zip(body, expected, strict=True):
            np.testing.assert_allclose(np.array(got), want, atol=1e-5)
        assert json.loads(client.get("/info")[1])["quantize"] == "int8"
