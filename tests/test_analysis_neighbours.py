"""`elmo analyze neighbours`: exact chunked search against brute force, the corpus index
(reused, rebuilt when the corpus changes, never left half-written), the command."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from elmo import save_pretrained
from elmo.analysis import neighbours as nb
from elmo.analysis.neighbours import NeighbourIndex, static_vectors, top_k, unit_rows
from elmo.cli import main
from elmo.embed import Embedder
from elmo.errors import ElmoError
from tests.conftest import random_bilm

CORPUS = [
    "the bank raised its rates",
    "we sat on the bank of the river",
    "",
    "a play at the theatre",
    "they play football on sunday",
    "the river bank was muddy and the bank was closed",
]


def brute_force(matrix, queries, k, exclude=()):
    scores = np.asarray(queries, np.float32) @ np.asarray(matrix, np.float32).T
    scores[:, list(exclude)] = -np.inf
    index = np.array([sorted(range(len(row)), key=lambda i: (-row[i], i))[:k] for row in scores])
    index = index[:, : len(matrix) - len(set(exclude))]
    return index, np.take_along_axis(scores, index, axis=1)


@pytest.mark.parametrize("n, k, chunk", [(100, 5, 7), (100, 5, 1000), (10, 30, 3), (50, 1, 50)])
def test_top_k_equals_brute_force_across_chunks(monkeypatch, n, k, chunk):
    monkeypatch.setattr(nb, "CHUNK_ROWS", chunk)
    rng = np.random.default_rng(n + k)
    matrix = unit_rows(rng.normal(size=(n, 8)))
    matrix[n // 2] = matrix[n // 3]  # a tie: the lower index comes first
    queries = unit_rows(rng.normal(size=(3, 8)))
    queries[0] = matrix[n // 3]
    exclude = [1, n - 1]
    index, scores = top_k(matrix, queries, k, exclude)
    want_index, want_scores = brute_force(matrix, queries, k, exclude)
    np.testing.assert_array_equal(index, want_index)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6)
    if k > 1:
        assert list(index[0, :2]) == sorted([n // 3, n // 2])


def test_top_k_reads_a_float16_hdf5_dataset_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(nb, "CHUNK_ROWS", 16)
    rng = np.random.default_rng(0)
    matrix = unit_rows(rng.normal(size=(200, 12))).astype(np.float16)
    with h5py.File(tmp_path / "m.hdf5", "w") as f:
        f["m"] = matrix
    query = unit_rows(rng.normal(size=(1, 12)))
    with h5py.File(tmp_path / "m.hdf5", "r") as f:
        index, scores = top_k(f["m"], query, 10)
    want_index, want_scores = brute_force(matrix, query, 10)
    np.testing.assert_array_equal(index, want_index)  # exact on the stored fp16 values
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


def test_index_search_equals_brute_force_over_embedded_corpus(tmp_path, corpus):
    embedder = Embedder(random_bilm(seed=2))
    index = NeighbourIndex.open_or_build(embedder, corpus, 1, tmp_path / "idx", "float32",
                                         progress=False)
    sentences = [line.split() for line in CORPUS]
    rows = []  # (line, position, layer-1 vector) of every corpus token
    for n, s in enumerate(sentences):
        if s:
            layers = embedder.embed_sentence(s)
            rows += [(n, i, layers[1, i]) for i in range(len(s))]
    assert len(index) == len(rows)
    query = embedder.embed_sentence("money in the bank".split())[1, 3]
    want, scores = brute_force(unit_rows(np.stack([r[2] for r in rows])), unit_rows(query[None]), 4)
    got = index.nearest_occurrences(query, 4)
    assert [(o.line, o.position) for o in got] == [rows[i][:2] for i in want[0]]
    np.testing.assert_allclose([o.cosine for o in got], scores[0], rtol=1e-5, atol=1e-6)
    assert got[0].tokens == sentences[got[0].line]

    # static: layer 0 against the distinct corpus words, the word itself left out
    words = list(dict.fromkeys(w for s in sentences for w in s))
    static = unit_rows(static_vectors(embedder.model, words))
    layer0 = embedder.embed_sentence(["bank"])[0, 0]
    np.testing.assert_allclose(unit_rows(layer0[None, : static.shape[1]])[0],
                               static[words.index("bank")], rtol=1e-5, atol=1e-6)
    near = index.nearest_words(static[words.index("bank")], 3, "bank")
    want, _ = brute_force(static, static[None, words.index("bank")], 3, [words.index("bank")])
    assert [w for w, _ in near] == [words[i] for i in want[0]]
    index.close()


def test_index_is_reused_and_rebuilt_for_new_content(tmp_path, corpus, monkeypatch):
    embedder = Embedder(random_bilm(seed=2))
    directory = tmp_path / "idx"
    first = NeighbourIndex.open_or_build(embedder, corpus, 2, directory, progress=False)
    first.close()
    calls = []
    monkeypatch.setattr(nb, "_build_index", lambda *a: calls.append(a))
    NeighbourIndex.open_or_build(embedder, corpus, 2, directory, progress=False).close()
    assert calls == [] and len(list(directory.iterdir())) == 1  # same model + corpus: reused
    monkeypatch.undo()
    corpus.write_text("a different corpus\n", encoding="utf-8")
    second = NeighbourIndex.open_or_build(embedder, corpus, 2, directory, progress=False)
    assert len(second) == 3 and len(list(directory.iterdir())) == 2
    second.close()


def test_a_killed_build_resumes_after_its_last_segment(tmp_path, monkeypatch, capsys):
    """Killed in its third chunk of lines, a build keeps the two segments before it and
    resumes after them: the index is the one a build that was not killed writes, bit for
    bit (each line computed in the batch it has in one run)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS * 3) + "\n", encoding="utf-8")
    embedder = Embedder(random_bilm(seed=2), batch_size=1)  # chunks of 4 lines with tokens
    whole = NeighbourIndex.open_or_build(embedder, corpus, 1, tmp_path / "whole", "float32",
                                         progress=False)
    embed_batch, embedded = Embedder.embed_batch, []

    def dying_after(n):
        def embed(self, sentences):
            if len(embedded) == n:
                raise KeyboardInterrupt
            embedded.extend(map(tuple, sentences))
            return embed_batch(self, sentences)
        return embed

    directory = tmp_path / "idx"
    monkeypatch.setattr(Embedder, "embed_batch", dying_after(9))  # in its third chunk
    with pytest.raises(KeyboardInterrupt):
        NeighbourIndex.open_or_build(embedder, corpus, 1, directory, "float32")
    assert [p.suffix for p in directory.iterdir()] == [".partial"]  # no index file yet
    embedded.clear()
    monkeypatch.setattr(Embedder, "embed_batch", dying_after(-1))  # never killed
    resumed = NeighbourIndex.open_or_build(embedder, corpus, 1, directory, "float32")
    assert "resuming" in capsys.readouterr().err
    lines = [tuple(text.split()) for text in CORPUS * 3 if text.split()]
    assert sorted(embedded) == sorted(lines[8:])  # two segments of four lines were kept
    assert [p.suffix for p in directory.iterdir()] == [".hdf5"]
    for name in ("vectors", "line", "position", "static"):
        np.testing.assert_array_equal(resumed.file[name][...], whole.file[name][...])
    assert resumed.words == whole.words
    resumed.close()
    whole.close()


def test_bad_inputs(tmp_path, corpus):
    embedder = Embedder(random_bilm(seed=2))
    with pytest.raises(ElmoError, match="corpus not found"):
        NeighbourIndex.open_or_build(embedder, tmp_path / "none.txt", 1, tmp_path)
    with pytest.raises(ElmoError, match="layers 0..2"):
        NeighbourIndex.open_or_build(embedder, corpus, 3, tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ElmoError, match="empty.txt: no tokens"):
        NeighbourIndex.open_or_build(embedder, empty, 1, tmp_path / "idx", progress=False)
    assert not list((tmp_path / "idx").iterdir())


def test_cli_json_table_and_missing_word(tmp_path, corpus, capsys):
    model = save_pretrained(random_bilm(seed=4), tmp_path / "model")
    args = ["analyze", "neighbours", "--model", str(model), "--corpus", str(corpus),
            "--sentence", "the bank of the river", "--word", "bank", "-k", "3",
            "--index-dir", str(tmp_path / "idx"), "--quiet"]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["layer"] == 2 and result["position"] == 1
    assert len(result["contextual"]) == 3 and len(result["static"]) == 3
    assert "bank" not in [s["word"] for s in result["static"]]
    cosines = [c["cosine"] for c in result["contextual"]]
    assert cosines == sorted(cosines, reverse=True)
    top = result["contextual"][0]
    assert top["sentence"] == CORPUS[top["line"]].split()
    assert main([*args, "--context", "1"]) == 0
    out = capsys.readouterr().out
    assert "the [bank] of the river" in out and "static (layer 0)" in out
    tokens, i = top["sentence"], top["position"]
    shown = " ".join(tokens[max(0, i - 1):i] + [f"[{tokens[i]}]"] + tokens[i + 1:i + 2])
    assert shown in out and " ".join(tokens) not in out  # cut to one token each side
    assert main([*args[:-1], "--word", "banks"]) == 1
    assert "'banks' occurs 0 time(s)" in capsys.readouterr().err
