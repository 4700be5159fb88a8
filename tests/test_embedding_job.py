"""The embedding job (`Embedder.run_job`) and its settings: a sink is anything with
the methods of `Sink`, so a toy one is added here as any new sink would be; it receives the
job's items in order with their layers, resumes after the segments a killed run saved (bit for
bit), starts anew for another identity, and names an item that does not fit where it is. The
flags of `elmo embed`, `--ray` and `elmo serve` are the fields of `EmbedSettings`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from elmo.cli import build_parser
from elmo.cli.common import settings_given
from elmo.embedding import Embedder, EmbedSettings, Item, Progress
from elmo.embedding.settings import EMBEDDER_SETTINGS
from elmo.errors import InputFileError
from elmo.io.inputs import embedded_kind
from elmo.memory import DeviceMemoryError
from tests.conftest import random_bilm

SENTENCES = [["the", "bank"], ["a"], [], ["we", "sat", "on", "the", "river", "bank"], ["b"],
             ["money", "in", "the", "bank"], ["c", "d"], ["e"], ["x", "y", "z"], ["f"]]


class ToySink:
    """Segments kept in `store` (a dict standing for a directory that outlives a run)."""

    def __init__(self, store: dict) -> None:
        self.store, self.path, self.restarted = store, Path("toy"), False

    def open(self, identity: dict[str, str]) -> int:
        if self.store.get("identity") != identity:
            self.restarted = "identity" in self.store
            self.store.clear()
            self.store.update(identity=identity, segments=[])
        segments = self.store["segments"]
        return segments[-1][-1][0] + 1 if segments else 0

    def save(self, items, layers) -> None:
        self.store["segments"].append([(item.number, item.name, a.copy())
                                       for item, a in zip(items, layers, strict=True)])

    def discard(self) -> None:
        self.store.clear()

    def finish(self) -> None:
        self.store["finished"] = True


@pytest.fixture(scope="module")
def embedder():
    return Embedder(random_bilm(seed=4), batch_size=1)  # chunks of 4 items


def _items(sentences, asked=None):
    def items(start):
        if asked is not None:
            asked.append(start)
        for number in range(start, len(sentences)):
            yield Item(number, f"s{number}", sentences[number],
                       where=f"toy.txt, line {number + 1}")
    return items


def _run(embedder, store, identity=None, items=None, **progress):
    embedder.run_job(items or _items(SENTENCES), ToySink(store), identity or {"toy": "1"},
                     Progress("toy", "sentence", len(SENTENCES),
                              **{"enabled": False, **progress}))


def test_a_toy_sink_receives_every_item_in_order_with_its_layers(embedder):
    store: dict = {}
    _run(embedder, store)
    assert store["finished"] and store["identity"] == {"toy": "1", **embedder.settings()}
    saved = [row for segment in store["segments"] for row in segment]
    assert [[number for number, _, _ in s] for s in store["segments"]] == \
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]  # a segment per chunk of the embedder
    assert [name for _, name, _ in saved] == [f"s{i}" for i in range(len(SENTENCES))]
    for (_, _, got), want in zip(saved, embedder.embed_sentences(SENTENCES), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_killed_job_resumes_after_the_segments_it_saved(embedder, monkeypatch, capsys):
    whole: dict = {}
    _run(embedder, whole)
    embed_batch, batches = Embedder.embed_batch, []

    def dying(self, sentences):
        if len(batches) == 6:  # in the second chunk
            raise KeyboardInterrupt
        batches.append(sentences)
        return embed_batch(self, sentences)

    store: dict = {}
    monkeypatch.setattr(Embedder, "embed_batch", dying)
    with pytest.raises(KeyboardInterrupt):
        _run(embedder, store)
    assert len(store["segments"]) == 1 and "finished" not in store
    monkeypatch.setattr(Embedder, "embed_batch", embed_batch)
    asked: list[int] = []
    _run(embedder, store, items=_items(SENTENCES, asked), enabled=True)
    assert asked == [4]  # only the items not saved are read again
    assert "resuming toy: 4 of 10 sentences were embedded before" in capsys.readouterr().err
    for a, b in zip(store["segments"], whole["segments"], strict=True):
        for (na, sa, la), (nb, sb, lb) in zip(a, b, strict=True):
            assert (na, sa) == (nb, sb) and np.array_equal(la, lb)  # bit for bit


def test_another_identity_starts_anew(embedder, capsys):
    store: dict = {}
    _run(embedder, store, {"toy": "1"})
    store["segments"] = store["segments"][:1]
    del store["finished"]
    asked: list[int] = []
    _run(embedder, store, {"toy": "2"}, items=_items(SENTENCES, asked), enabled=True)
    assert asked == [0] and store["identity"]["toy"] == "2"
    assert "toy was left by a run of another input, model or setting: starting anew" in \
        capsys.readouterr().err


def test_an_item_that_does_not_fit_is_named_where_it_is_and_bad_input_drops_the_work(
        embedder):
    def compute(tokens, start):
        raise DeviceMemoryError("cuda:0", len(tokens[1]), start + 1)

    store: dict = {}
    with pytest.raises(DeviceMemoryError, match=r"toy.txt, line 2 \(1 tokens\) does not fit"):
        embedder.run_job(_items(SENTENCES), ToySink(store), {"toy": "1"},
                         Progress("toy", enabled=False), compute)
    assert store["segments"] == []  # the work before it is kept (none here)

    def bad(start):
        yield from _items(SENTENCES)(start)
        raise InputFileError("toy.txt, line 11: not valid UTF-8")

    with pytest.raises(InputFileError):
        _run(embedder, store, items=bad)
    assert store == {}  # discarded: nothing worth resuming


def test_the_embedding_flags_are_the_fields_of_embed_settings():
    """`elmo embed` (and so `--ray`) takes every field of EmbedSettings as a flag, with its
    default; `elmo serve` the ones it uses; values are read as each field says."""
    parser = build_parser()
    defaults = settings_given(parser.parse_args(["embed", "m", "in.txt", "out.hdf5"]))
    assert defaults == EmbedSettings()
    given = settings_given(parser.parse_args([
        "embed", "m", "in.txt", "out.hdf5", "--layers", "1", "--pool", "mean", "--dtype",
        "float16", "--tokenizer", "chars", "--batch-size", "3", "--max-tokens", "20",
        "--device", "cpu", "--quantize", "int8", "--precision", "bf16", "--stateful",
        "--no-cuda-graphs"]))
    assert given == EmbedSettings(layers="1", pool="mean", dtype="float16", tokenizer="chars",
                                  batch_size=3, max_tokens=20, device="cpu", quantize="int8",
                                  precision="bf16", stateful=True, cuda_graphs=False)
    served = settings_given(parser.parse_args(["serve", "--layers", "top", "--device", "cpu"]))
    assert served == EmbedSettings(layers="top", device="cpu")
    with pytest.raises(SystemExit):
        parser.parse_args(["embed", "m", "i", "o", "--max-tokens", "lots"])
    assert set(EMBEDDER_SETTINGS) == {"tokenizer", "batch_size", "max_tokens", "device",
                                      "quantize", "precision", "stateful", "cuda_graphs"}


def test_elmo_embed_reads_only_the_kinds_with_entries(tmp_path):
    """A JSON-lines file (paragraphs to split) is a text file to `elmo embed`, as before."""
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"text": "a b"}\n', encoding="utf-8")
    assert embedded_kind(jsonl).name == "text"
    assert embedded_kind(tmp_path / "b.fa.gz", "fasta").name == "fasta"
    with pytest.raises(InputFileError, match="elmo embed reads no input format 'jsonl'"):
        embedded_kind(jsonl, "jsonl")
