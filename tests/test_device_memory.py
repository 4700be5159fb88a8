"""Memory-aware batching on a device (`elmo.memory`), on the CPU: a fake probe of the free
memory gives the token budget, and an injected out-of-memory error (`torch.OutOfMemoryError`,
raised by `BiLM.contextualize` for batches that are too big) makes every entry point halve the
batch, or name the sentence that does not fit alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import h5py
import numpy as np
import pytest
import torch

from elmo import save_pretrained
from elmo.bio import SeqVecEmbedder
from elmo.cli import main
from elmo.config import BiLMConfig
from elmo.embed import Embedder
from elmo.memory import (
    CPU_MAX_TOKENS,
    MAX_AUTO_TOKENS,
    DeviceMemoryError,
    bytes_per_position,
    resolve_max_tokens,
    token_budget,
)
from elmo.modules.bilm import BiLM
from tests.conftest import random_bilm

WORDS = "the bank raised rates we sat on river a b c d e f g h money cat mat".split()
CUDA = torch.device("cuda", 0)


def sentences(n: int, seed: int = 0, longest: int = 9) -> list[list[str]]:
    """`n` sentences of 1..`longest` words."""
    rng = np.random.default_rng(seed)
    return [list(rng.choice(WORDS, rng.integers(1, longest + 1))) for _ in range(n)]


def running_out_of_memory(monkeypatch, too_big: Callable[[int, int], bool]) -> list[tuple]:
    """Every BiLM's `contextualize` raises torch.OutOfMemoryError for a batch of (rows,
    positions with the boundaries) that `too_big` says; returns the (rows, positions) of each
    call."""
    calls = []
    real = BiLM.contextualize

    def contextualize(self, tokens, lengths, keep_boundaries=False):
        rows, width = tokens.shape[:2]
        calls.append((rows, width))
        if too_big(rows, width):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB "
                                         "(injected)")
        return real(self, tokens, lengths, keep_boundaries)

    monkeypatch.setattr(BiLM, "contextualize", contextualize)
    return calls


def assert_same(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert [a.shape for a in got] == [a.shape for a in expected]
    for a, b in zip(got, expected, strict=True):
        assert np.allclose(a, b, rtol=0, atol=1e-6)


# ---- the budget ------------------------------------------------------------------------------


def test_the_budget_is_what_half_the_free_memory_holds_and_scales_with_it(monkeypatch):
    config = BiLMConfig.preset("small")
    per_position = bytes_per_position(config)
    asked = []
    free = {"bytes": 0}

    def probe(device):
        asked.append(device)
        return free["bytes"]

    monkeypatch.setattr("elmo.memory.free_memory", probe)
    budgets = []
    for positions in (1000, 2000, 4000):  # what the free memory holds at FREE_SHARE 0.5
        free["bytes"] = 2 * positions * per_position
        budgets.append(token_budget(config, CUDA))
    assert budgets == [512, 1024, 2048]  # rounded down to a power of two, twice as much free
    assert asked == [CUDA] * 3
    free["bytes"] = 10**15
    assert token_budget(config, CUDA) == MAX_AUTO_TOKENS
    free["bytes"] = 0
    assert token_budget(config, CUDA) == 1
    free["bytes"] = 2 * 1000 * per_position  # "auto" is the budget, a number stays
    assert resolve_max_tokens("auto", config, CUDA) == 512
    assert resolve_max_tokens(100_000, config, CUDA) == 100_000
    # What a position costs grows with the model, and bf16 halves the floats
    original = BiLMConfig.preset("original")
    assert bytes_per_position(original) > 3 * per_position
    assert bytes_per_position(original, torch.bfloat16) < 0.51 * bytes_per_position(original)


def test_off_cuda_the_budget_is_16384_and_the_device_is_not_asked(monkeypatch):
    monkeypatch.setattr("elmo.memory.free_memory", lambda device: pytest.fail("probed"))
    assert token_budget(BiLMConfig.preset("small"), torch.device("cpu")) == CPU_MAX_TOKENS
    assert Embedder(random_bilm(), device="cpu").max_tokens == 16384
    assert Embedder(random_bilm(), device="cpu", max_tokens="auto").max_tokens == 16384
    assert Embedder(random_bilm(), device="cpu", max_tokens=77).max_tokens == 77


def test_default_batches_hold_256_sentences_and_64_when_stateful():
    """Stateless batches of 256 (each LSTM step multiplies more rows at once); stateful ones
    keep AllenNLP's 64, whose batches change the numbers; a number given is used."""
    assert Embedder(random_bilm(), device="cpu").batch_size == 256
    assert Embedder(random_bilm(), device="cpu", stateful=True).batch_size == 64
    assert Embedder(random_bilm(), device="cpu", stateful=True, batch_size=8).batch_size == 8
    assert Embedder(random_bilm(), device="cpu").chunk_size == 1024  # as 16 x 64 before
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        Embedder(random_bilm(), device="cpu", batch_size=0)


@pytest.mark.parametrize("bad", [0, -5, "lots", 2.5, True])
def test_max_tokens_other_than_auto_or_a_whole_number_is_refused(bad):
    with pytest.raises(ValueError, match="max_tokens must be 'auto' or a whole number >= 1"):
        Embedder(random_bilm(), max_tokens=bad)


# ---- the Embedder: halving, the sentence that does not fit, stateful ---------------------------


@pytest.mark.parametrize("token_cache_size", [0, 20000])
def test_a_batch_out_of_memory_is_halved_with_the_same_vectors_in_input_order(
        monkeypatch, token_cache_size):
    data = sentences(16)
    expected = Embedder(random_bilm(), token_cache_size=token_cache_size).embed_sentences(data)
    embedder = Embedder(random_bilm(), token_cache_size=token_cache_size)
    calls = running_out_of_memory(monkeypatch, lambda rows, width: rows > 3)
    assert_same(embedder.embed_sentences(data), expected)
    assert calls[0][0] == 16  # the chunk's one planned batch
    done = [rows for rows, _ in calls if rows <= 3]
    assert sum(done) == len(data)  # each sentence computed once, in batches that fit
    calls.clear()
    assert_same(embedder.embed_batch(data[:8]), expected[:8])  # one call: halved too
    assert [rows for rows, _ in calls] == [8, 4, 2, 2, 4, 2, 2]


def test_one_sentence_that_never_fits_names_its_number_and_length(monkeypatch):
    data = sentences(40, longest=5)
    data[35] = ["word"] * 11  # 13 positions with its boundaries; the second chunk of 32
    embedder = Embedder(random_bilm(), batch_size=2, device="cpu")  # simulated, on any machine
    running_out_of_memory(monkeypatch, lambda rows, width: width > 12)
    with pytest.raises(DeviceMemoryError) as caught:
        embedder.embed_sentences(data)
    message = str(caught.value)
    assert message.startswith("sentence 35 (11 tokens) does not fit in the free memory of cpu")
    assert "--device cpu" in message and "a smaller --max-tokens does not help" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no OOM trace


def test_a_stateful_batch_is_never_split_and_says_so(monkeypatch):
    embedder = Embedder(random_bilm(), batch_size=4, stateful=True)
    calls = running_out_of_memory(monkeypatch, lambda rows, width: rows > 2)
    with pytest.raises(DeviceMemoryError, match=r"a batch of 4 sentences from sentence 0 on "
                       r"\(the longest \d tokens\) .* --stateful cannot split a batch"):
        embedder.embed_sentences(sentences(6))
    assert [rows for rows, _ in calls] == [4]


# ---- elmo embed ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_pretrained(random_bilm(seed=11), tmp_path_factory.mktemp("memory") / "model")


def test_elmo_embed_halves_batches_that_run_out_of_memory(tmp_path, model_dir, monkeypatch):
    lines = [" ".join(s) for s in sentences(30)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cpu = ["--quiet", "--device", "cpu"]  # the out-of-memory errors are simulated, on any machine
    assert main(["embed", str(model_dir), str(src), str(tmp_path / "ref.hdf5"), *cpu]) == 0
    running_out_of_memory(monkeypatch, lambda rows, width: rows * width > 40)
    assert main(["embed", str(model_dir), str(src), str(tmp_path / "out.hdf5"), *cpu]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as out, h5py.File(tmp_path / "ref.hdf5") as ref:
        assert json.loads(out["sentence_to_index"][0]) == json.loads(ref["sentence_to_index"][0])
        assert_same([out[str(i)][...] for i in range(30)], [ref[str(i)][...] for i in range(30)])


def test_elmo_embed_names_the_line_that_never_fits_in_one_line(tmp_path, model_dir, monkeypatch,
                                                                  capsys):
    src = tmp_path / "in.txt"
    src.write_text("a b\nthe bank\n" + "word " * 30 + "\nc\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    running_out_of_memory(monkeypatch, lambda rows, width: width > 20)
    assert main(["embed", str(model_dir), str(src), str(out), "--quiet", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"elmo: error: {src}, line 3 (30 tokens) does not fit in the free "
                          "memory of cpu, even alone: split it")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


# ---- SeqVecEmbedder, elmo serve, elmo.ray ------------------------------------------------------


def test_seqvec_embed_many_halves_batches_too(monkeypatch):
    proteins = ["MKVLAAGIVG", "MSTNPKPQRKTKRNTNRRPQDVKFPGG", "AC", "MKVLAAGIVG" * 3]
    expected = list(SeqVecEmbedder(random_bilm()).embed_many(proteins))
    calls = running_out_of_memory(monkeypatch, lambda rows, width: rows > 1)
    assert_same(list(SeqVecEmbedder(random_bilm()).embed_many(proteins)), expected)
    assert calls[0][0] == 4


def test_serve_fails_only_the_request_whose_input_never_fits(monkeypatch):
    batching = pytest.importorskip("elmo.serve.batching")
    fits, too_long = [["a", "b"], ["the", "bank"]], [["c"], ["word"] * 30]
    expected = Embedder(random_bilm()).embed_sentences(fits)
    embedder = Embedder(random_bilm())
    running_out_of_memory(monkeypatch, lambda rows, width: width > 20)
    calls = []
    real = embedder.embed_sentences
    monkeypatch.setattr(embedder, "embed_sentences", lambda s: calls.append(len(s)) or real(s))

    async def two_requests():
        queue = batching.BatchQueue(embedder, max_batch_tokens=4096)
        queue.start()
        try:
            return await asyncio.gather(queue.embed(too_long), queue.embed(fits),
                                        return_exceptions=True)
        finally:
            await queue.stop()

    failed, answered = asyncio.run(two_requests())
    assert calls == [4, 2]  # taken together; the request that fits again, without the other
    assert isinstance(failed, DeviceMemoryError)
    assert str(failed).startswith("input 1 of the request (30 tokens) does not fit")
    assert str(failed).endswith("even alone: send it in shorter pieces")
    assert_same(answered, expected)


def test_serve_answers_413_naming_the_input_that_never_fits(monkeypatch):
    pytest.importorskip("fastapi")
    from tests.helpers.serving import Client, serving, wait_for

    running_out_of_memory(monkeypatch, lambda rows, width: width > 20)
    with serving(Embedder(random_bilm())) as url:
        client = Client(url)
        wait_for(lambda: client.get("/health")[0] == 200, "the model to load")
        status, body = client.post("/embed", {"inputs": ["a b", "word " * 30]})
        assert status == 413 and body["error"].startswith("input 1 of the request (30 tokens)")
        assert client.post("/embed", {"inputs": ["a b", "word " * 10]})[0] == 200
        client.close()


def test_ray_embed_and_its_block_writer_use_the_same_mechanism(tmp_path, model_dir,
                                                               monkeypatch):
    pytest.importorskip("ray")
    from elmo.ray import Embed
    from elmo.ray.files import BlockWriter

    lines = [" ".join(s) for s in sentences(12)]
    expected = Embed(str(model_dir), layers="all")({"text": np.array(lines)})["embedding"]
    calls = running_out_of_memory(monkeypatch, lambda rows, width: rows > 2 or width > 20)
    got = Embed(str(model_dir), layers="all")({"text": np.array(lines)})["embedding"]
    assert_same(list(got), list(expected))
    assert calls[0][0] == 12
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines[:4] + ["word " * 30]) + "\n", encoding="utf-8")
    block = {"name": np.array(["part-000000.parquet"]), "source": np.array([str(src)]),
             "start": np.array([2]), "stop": np.array([5])}
    done = BlockWriter(str(tmp_path), str(model_dir), {})(block)
    assert done["error"][0].startswith(f"{src}, line 5 (30 tokens) does not fit")
    assert not list(tmp_path.glob("*part-*"))
