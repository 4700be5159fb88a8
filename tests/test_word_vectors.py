"""Static word vectors for task models (`--word-vectors`), and `--min-updates`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from elmo.cli import main
from elmo.errors import InputFileError
from elmo.tasks.encoder import UNK, EncoderConfig, WordEncoder
from elmo.tasks.word_vectors import load_word_vectors, read_word_vectors, vector_dim
from tests.conftest import write_text
from tests.helpers.tasks import classification_file

LINES = ["good 0.5 -1 2", "bad 1e-1 0 -0.25", "the 1 1 1", "Good 9 9 9"]


def vectors_file(path, lines=LINES, header: bool = True, gz: bool = False):
    return write_text(path, "\n".join(([f"{len(lines)} 3"] if header else []) + lines) + "\n", gz)


@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("gz", [False, True])
def test_read_with_and_without_header_plain_or_gz(tmp_path, header, gz):
    path = vectors_file(tmp_path / "v.txt", header=header, gz=gz)
    assert vector_dim(path) == 3
    dim, vectors = read_word_vectors(path)
    assert dim == 3 and list(vectors) == ["good", "bad", "the", "Good"]
    np.testing.assert_array_equal(vectors["bad"], np.array([0.1, 0, -0.25], dtype=np.float32))
    dim, some = read_word_vectors(path, {"the", "missing"})
    assert list(some) == ["the"]


def test_word2vec_trailing_spaces_and_words_seen_twice(tmp_path):
    path = vectors_file(tmp_path / "v.txt", ["a 1 2 3 ", "a 4 5 6 "])
    dim, vectors = read_word_vectors(path)
    assert dim == 3 and vectors["a"].tolist() == [1, 2, 3]  # the first one is kept


def test_malformed_lines_name_file_and_line(tmp_path):
    changed = vectors_file(tmp_path / "dim.txt", [*LINES[:2], "the 1 1", LINES[3]], header=False)
    with pytest.raises(InputFileError, match=r"dim.txt, line 3: 2 values, but line 1 gives "
                       r"vectors of 3"):
        read_word_vectors(changed)
    against_header = vectors_file(tmp_path / "h.txt", ["a 1 2 3 4"])
    with pytest.raises(InputFileError, match=r"h.txt, line 2: 4 values, but the header "
                       r"\(line 1\) gives vectors of 3"):
        read_word_vectors(against_header)
    text = vectors_file(tmp_path / "nan.txt", ["good 0.5 x 2"], header=False)
    with pytest.raises(InputFileError, match=r"nan.txt, line 1: a value of 'good' is not a "
                       "number"):
        read_word_vectors(text)
    alone = vectors_file(tmp_path / "word.txt", ["lonely"], header=False)
    with pytest.raises(InputFileError, match="word.txt, line 1: a word without values"):
        read_word_vectors(alone)
    count = tmp_path / "count.txt"
    count.write_text("5 3\n" + "\n".join(LINES) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="the header says 5 vectors, the file holds 4"):
        read_word_vectors(count)


def test_embedding_rows_from_vectors_with_coverage(tmp_path):
    path = vectors_file(tmp_path / "v.txt")
    torch.manual_seed(0)
    embedding = nn.Embedding(6, 3, padding_idx=0)
    before = embedding.weight.detach().clone()
    vocab = ["<pad>", "<unk>", "good", "GOOD", "The", "unseen"]
    coverage = load_word_vectors(embedding, vocab, path)
    assert coverage == {"file": str(path), "dim": 3, "vocabulary": 4, "found": 3,
                        "lowercased": 2, "coverage": 75.0}
    w = embedding.weight.detach()
    assert w[2].tolist() == [0.5, -1, 2] and w[3].tolist() == [0.5, -1, 2]  # GOOD -> good
    assert w[4].tolist() == [1, 1, 1]
    assert w[0].abs().sum() == 0 and torch.equal(w[1], before[1])  # specials untouched
    std = float(np.std([0.5, -1, 2, 1, 1, 1]))  # of the vectors read: good, the
    torch.testing.assert_close(w[5], before[5] * std)  # random, at the vectors' scale
    with pytest.raises(InputFileError, match="vectors of 3 values, the model's word embeddings "
                       "have 4"):
        load_word_vectors(nn.Embedding(6, 4), vocab, path)


def train_args(tmp_path, *extra):
    classification_file(tmp_path / "train", 40, 0)
    classification_file(tmp_path / "dev", 12, 1)
    return ["task", "train", "--task", "classification", "--format", "label-text", "--train",
            str(tmp_path / "train"), "--dev", str(tmp_path / "dev"), "--elmo", "none", "--out",
            str(tmp_path / "run"), "--hidden-dim", "8", "--batch-size", "8", "--quiet", *extra]


def test_frozen_word_vectors_are_recorded_and_kept(tmp_path):
    path = vectors_file(tmp_path / "v.txt")
    assert main(train_args(tmp_path, "--word-vectors", str(path), "--freeze-word-vectors",
                           "--epochs", "2")) == 0
    run = tmp_path / "run"
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["embedding_dim"] == 3  # from the file
    assert saved["word_vectors"]["found"] == 3  # good, bad, the
    assert saved["word_vectors"]["vocabulary"] == 6  # and saw, in, met
    result = json.loads((run / "result.json").read_text())
    assert result["word_vectors"] == saved["word_vectors"]
    vocab = (run / "vocab.txt").read_text(encoding="utf-8").split("\n")
    weights = load_file(str(run / "model.safetensors"))["task.encoder.embed.weight"]
    assert weights[vocab.index("good")].tolist() == [0.5, -1, 2]  # frozen


def test_word_vectors_train_unless_frozen(tmp_path):
    path = vectors_file(tmp_path / "v.txt")
    assert main(train_args(tmp_path, "--word-vectors", str(path), "--epochs", "2",
                           "--lr", "0.05")) == 0
    vocab = (tmp_path / "run" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    weights = load_file(str(tmp_path / "run" / "model.safetensors"))["task.encoder.embed.weight"]
    assert weights[vocab.index("good")].tolist() != [0.5, -1, 2]
    assert vocab[UNK] == "<unk>" and weights[UNK].abs().sum() == 0  # never trained, never random


def test_unknown_words_start_at_zero():
    torch.manual_seed(0)
    encoder = WordEncoder(EncoderConfig(vocab_size=50, embedding_dim=4, hidden_dim=3))
    assert encoder.embed.weight[UNK].abs().sum() == 0
    assert encoder.embed.weight[2:].abs().sum(1).min() > 0  # the other words are random


def test_word_vector_options_are_checked(tmp_path, capsys):
    assert main(train_args(tmp_path, "--freeze-word-vectors")) == 1
    assert "--freeze-word-vectors needs --word-vectors FILE" in capsys.readouterr().err
    path = vectors_file(tmp_path / "v.txt")
    assert main(train_args(tmp_path, "--word-vectors", str(path), "--embedding-dim", "5")) == 1
    assert "leave out --embedding-dim or set it to 3" in capsys.readouterr().err


def test_min_updates_makes_epochs_of_several_passes(tmp_path):
    # 40 examples in batches of 8: 5 updates a pass
    assert main(train_args(tmp_path, "--epochs", "2", "--patience", "5")) == 0
    plain = json.loads((tmp_path / "run" / "result.json").read_text())
    assert (plain["updates"], plain["passes_per_epoch"]) == (10, 1)
    args = train_args(tmp_path, "--epochs", "2", "--patience", "5", "--min-updates", "26")
    args[args.index("--out") + 1] = str(tmp_path / "more")
    assert main(args) == 0
    more = json.loads((tmp_path / "more" / "result.json").read_text())
    assert (more["updates"], more["passes_per_epoch"], more["epochs"]) == (30, 3, 2)
    lines = (tmp_path / "more" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2  # one dev score per epoch, as without it


def test_sample_efficiency_takes_min_updates(tmp_path, capsys):
    data = tmp_path / "train"
    classification_file(data, 40, 0)
    args = ["analyze", "sample-efficiency", "--out", str(tmp_path / "runs"), "--model", "none",
            "--fractions", "0.1,1", "--seeds", "0", "--quiet", "--json", "--",
            "--task", "classification", "--format", "label-text", "--train", str(data),
            "--dev", str(data), "--epochs", "2", "--hidden-dim", "8", "--batch-size", "8",
            "--min-updates", "20"]
    assert main(args) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    small = [r for r in runs if r["fraction"] == 0.1]
    assert small and all(r["n_train"] == 4 and r["updates"] == 20 for r in small)
    assert all(r["updates"] == 20 for r in runs if r["fraction"] == 1)  # 5 a pass, 2 passes


def test_a_run_saved_before_these_options_resumes(tmp_path):
    assert main(train_args(tmp_path, "--epochs", "1")) == 0
    config = tmp_path / "run" / "config.json"
    saved = json.loads(config.read_text())
    assert saved["task"]["embedding_dim"] == 100  # the default, resolved and saved
    for new in ("min_updates", "word_vectors", "freeze_word_vectors", "max_answer_tokens"):
        del saved["task"][new]
    config.write_text(json.dumps(saved))
    assert main(train_args(tmp_path, "--epochs", "2")) == 0  # resumed, not refused
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 2
