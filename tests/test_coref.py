"""Coreference (`--task coref --format conll2012`): segments, the span-ranking model, the
CoNLL-2012 predictions, and train / evaluate / predict from the command line."""

from __future__ import annotations

import json
import random

import pytest
import torch

from elmo.cli import main
from elmo.errors import ElmoError
from elmo.tasks.config import TaskConfig
from elmo.tasks.conll2012 import read_conll2012
from elmo.tasks.coref_data import read_coref, segments, write_coref_predictions
from elmo.tasks.coref_metrics import coref_scores
from elmo.tasks.coref_model import CorefConfig, CorefModel, candidate_spans
from tests.helpers.conll2012 import TEXT, document, sentence, write_conll2012

NAMES = ["John", "Mary", "Anna", "Peter", "Sue", "Tom"]


def story(name: str, seed: int, sentences: int = 3) -> str:
    """A document in which one person is named, then referred to by "he" / "she" (one
    cluster), among sentences of filler words."""
    rng = random.Random(seed)
    person = rng.choice(NAMES)
    rows = [sentence(name, [(person, "NNP", "-", "*", [], "(0)"), ("came", "VBD", "-", "*", [],
                                                                     "-"),
                            ("home", "NN", "-", "*", [], "-"), (".", ".", "-", "*", [], "-")])]
    for _ in range(sentences - 1):
        pronoun = "he" if person in ("John", "Peter", "Tom") else "she"
        rows.append(sentence(name, [("then", "RB", "-", "*", [], "-"),
                                    (pronoun, "PRP", "-", "*", [], "(0)"),
                                    (rng.choice(["slept", "ate", "sat"]), "VBD", "-", "*", [],
                                     "-"),
                                    (".", ".", "-", "*", [], "-")]))
    return document(name, rows)


def corpus(path, n: int, seed: int):
    return write_conll2012(path, "".join(story(f"nw/toy/{seed}_{i}", seed * 100 + i)
                                         for i in range(n)))


# ---- segments -----------------------------------------------------------------------------


def test_a_long_document_is_cut_into_segments_of_the_configured_size(tmp_path):
    [doc] = read_conll2012(write_conll2012(tmp_path / "a", story("nw/x/1", 0, sentences=7)))
    assert len(doc.words) == 28
    cut = segments(doc, 9)  # two 4-word sentences fit in 9 words, three do not
    assert [s.size for s in cut] == [8, 8, 8, 4]
    assert [s.offset for s in cut] == [0, 8, 16, 24]
    assert all(len(s.sentences) <= 2 for s in cut)
    # each segment keeps the gold mentions inside it, in its own offsets
    assert cut[0].mentions == [(0, 0, 0), (5, 5, 0)] and cut[3].mentions == [(1, 1, 0)]
    # a sentence longer than the segment is cut into pieces
    pieces = segments(doc, 3)
    assert max(s.size for s in pieces) == 3 and sum(s.size for s in pieces) == 28


def test_mentions_across_a_segment_edge_are_counted(tmp_path):
    path = write_conll2012(tmp_path / "a", TEXT)  # "The big dog" (3 words) is a mention
    kept = read_coref(path, segment_words=2)
    total = sum(len(c) for d in read_conll2012(path) for c in d.token_clusters())
    assert sum(len(s.mentions) for s in kept) < total
    assert sum(len(s.mentions) for s in read_coref(path, segment_words=512)) == total


def test_candidate_spans_stay_inside_sentences():
    sentence_of = torch.tensor([0, 0, 0, 1, 1])
    starts, ends = candidate_spans(sentence_of, 2)
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == [
        (0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (3, 3), (3, 4), (4, 4)]


# ---- the model --------------------------------------------------------------------------


def test_the_loss_falls_and_the_clusters_are_learnt_on_a_toy_document():
    torch.manual_seed(0)
    model = CorefModel(CorefConfig(vocab_size=20, embedding_dim=16, hidden_dim=16,
                                   dropout=0.0, max_antecedents=5))
    ids = torch.tensor([[2, 3, 4, 5, 6, 0], [7, 3, 8, 9, 10, 11]])  # two sentences, 11 words
    mask = ids > 0
    gold = torch.tensor([[[0, 1, 0], [6, 6, 0], [2, 2, 1], [9, 10, 1]]])  # start, end, cluster
    inputs = {"speakers": torch.zeros(1, 11, dtype=torch.long), "genre": torch.tensor([3])}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(60):
        loss = model.loss(model(ids, mask, **inputs), gold, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 100
    model.eval()
    [clusters] = model.predict(model(ids, mask, **inputs), mask)
    assert sorted(map(sorted, clusters)) == [[(0, 1), (6, 6)], [(2, 2), (9, 10)]]


def test_the_model_keeps_the_configured_share_of_spans_and_antecedents():
    model = CorefModel(CorefConfig(vocab_size=10, embedding_dim=4, hidden_dim=4,
                                   top_span_ratio=0.5, max_antecedents=2, max_span_width=3))
    ids = torch.tensor([[2, 3, 4, 5, 6, 7, 8, 9]])
    scores = model(ids, ids > 0, speakers=torch.zeros(1, 8, dtype=torch.long),
                   genre=torch.tensor([0]))
    assert scores.starts.shape == (4,) and scores.scores.shape == (4, 3)
    assert (scores.ends - scores.starts).max() < 3
    # the first kept span has no earlier one: only the dummy
    assert torch.isinf(scores.scores[0, 1:]).all() and scores.scores[0, 0] == 0


# ---- predictions in the CoNLL-2012 layout -----------------------------------------------


def test_predicted_clusters_are_written_where_the_reader_finds_them(tmp_path):
    path = write_conll2012(tmp_path / "gold", TEXT)
    examples = read_coref(path, segment_words=4)
    predicted = [[[(e.offset, e.offset)] + ([(e.offset + 2, e.offset + 3)] if e.size > 3
                                           else [])] for e in examples]
    write_coref_predictions(tmp_path / "out", examples, predicted)
    written = read_conll2012(tmp_path / "out")
    # segments of 4 words: "John saw Mary ." | "He left ." and "The big dog barked" |
    # "loudly ." + "Nothing here"; each document's offsets start at 0
    expected = [[[(0, 0), (2, 3)], [(4, 4)]], [[(0, 0), (2, 3)], [(4, 4), (6, 7)]]]
    assert [sorted(d.token_clusters()) for d in written] == expected
    # every other column as read, line for line
    original = [r for d in read_conll2012(path) for s in d.sentences for r in s.rows]
    rewritten = [r for d in written for s in d.sentences for r in s.rows]
    assert [r.rsplit(maxsplit=1)[0] for r in rewritten] == \
        [r.rsplit(maxsplit=1)[0] for r in original]


def test_gold_written_back_scores_100(tmp_path):
    path = write_conll2012(tmp_path / "gold", TEXT)
    examples = read_coref(path)
    gold = [[[(s - e.offset, t - e.offset) for s, t in c] for c in e.document.token_clusters()]
            for e in examples]
    from elmo.tasks.registry import TASKS

    kind = TASKS["coref"]
    decoded = [kind.decode(e, p, []) for e, p in zip(examples, gold, strict=True)]
    write_coref_predictions(tmp_path / "out", examples, decoded)
    pairs = [(g.token_clusters(), p.token_clusters()) for g, p in
             zip(read_conll2012(path), read_conll2012(tmp_path / "out"), strict=True)]
    assert coref_scores(pairs)["score"] == pytest.approx(100.0)


# ---- the command line ---------------------------------------------------------------------


def test_train_evaluate_predict(tmp_path, tiny_model, capsys):
    for split, n, seed in (("train", 12, 0), ("dev", 4, 1), ("test", 4, 2)):
        corpus(tmp_path / split, n, seed)
    cache = ["--cache-dir", str(tmp_path / "cache"), "--quiet"]
    assert main(["task", "train", "--task", "coref", "--format", "conll2012",
                 "--train", str(tmp_path / "train"), "--dev", str(tmp_path / "dev"),
                 "--test", str(tmp_path / "test"), "--elmo", str(tiny_model),
                 "--out", str(tmp_path / "run"), "--epochs", "3", "--hidden-dim", "8",
                 "--embedding-dim", "8", "--lr", "0.01", "--segment-words", "8",
                 "--max-span-width", "3", *cache]) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["metric"] == "coref-f1" and 0 <= result["dev"] <= 100
    notes = json.loads((tmp_path / "run" / "config.json").read_text())["data"]["train"]
    assert notes["documents"] == 12 and notes["segments"] == 24  # 12 words: 8 + 4

    capsys.readouterr()
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(tmp_path / "test"),
                 "--json", *cache]) == 0
    evaluation = json.loads(capsys.readouterr().out)
    assert set(evaluation) >= {"score", "muc", "bcub", "ceafe"}
    assert evaluation["score"] == pytest.approx(
        (evaluation["muc"] + evaluation["bcub"] + evaluation["ceafe"]) / 3)
    assert evaluation["score"] == pytest.approx(result["test"])
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(tmp_path / "test"),
                 *cache]) == 0
    assert f"muc {evaluation['muc']:.2f}, bcub " in capsys.readouterr().out

    # the predicted file holds the clusters that evaluate scored, where a scorer reads them
    out = tmp_path / "predicted"
    assert main(["task", "predict", str(tmp_path / "run"), str(tmp_path / "test"), str(out),
                 *cache]) == 0
    pairs = [(g.token_clusters(), p.token_clusters()) for g, p in
             zip(read_conll2012(tmp_path / "test"), read_conll2012(out), strict=True)]
    assert coref_scores(pairs)["score"] == pytest.approx(evaluation["score"])


def test_a_file_without_clusters_or_with_an_unclosed_mention_is_refused(tmp_path, tiny_model,
                                                                        capsys):
    bare = write_conll2012(tmp_path / "bare", TEXT.replace("(1)", "-").replace("(2)", "-")
                           .replace("(3", "-").replace("(4", "-").replace("3)|4)", "-"))
    unclosed = write_conll2012(tmp_path / "unclosed", TEXT.replace("(2)", "(2"))
    for path, problem in ((bare, "no coreference mention"), (unclosed, "never closed")):
        assert main(["task", "train", "--task", "coref", "--format", "conll2012", "--train",
                     str(path), "--dev-fraction", "0.5", "--elmo", "none", "--out",
                     str(tmp_path / "run"), "--quiet"]) == 1
        err = capsys.readouterr().err
        assert problem in err and str(path) in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "config.json").exists()


def test_the_coref_options_are_checked(tmp_path):
    with pytest.raises(ElmoError, match="--segment-words must be >= 1"):
        TaskConfig(task="coref", train="t", dev="d", out="o", format="conll2012",
                   segment_words=0)
    with pytest.raises(ElmoError, match="--task coref reads --format conll2012"):
        TaskConfig(task="coref", train="t", dev="d", out="o", format="conll")
