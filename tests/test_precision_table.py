"""A precision is one record in `elmo.device.PRECISIONS`: its arithmetic (TF32, autocast),
where it applies and which use it is the default of on which device. Embedding, training and
serving read the table: a throwaway record added there is taken by all three, and by their
defaults."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from elmo.cli import build_parser
from elmo.cli.common import settings_given
from elmo.device import PRECISIONS, Precision, default_precision, precisions_described
from elmo.embedding import Embedder, EmbedSettings
from elmo.modules.bilm import BiLM
from tests.conftest import random_bilm
from tests.helpers.training import tiny_config, train_args, write_corpus

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
SENTENCES = [["the", "cat", "sat"], ["a"]]

# A toy: bfloat16 autocast that is the CPU's default for embedding and training.
TOY = Precision("bf16-cpu", "a toy: bfloat16 autocast, the CPU's default",
                autocast=torch.bfloat16, devices=("cpu",),
                default_for=(("embed", "cpu"), ("train", "cpu")))


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(PRECISIONS, TOY.name, TOY)


def test_the_defaults_of_each_use_per_device():
    assert default_precision("embed", CPU) == default_precision("embed", CUDA) == "fp32"
    assert default_precision("train", CPU) == "fp32"
    assert default_precision("train", CUDA) == "bf16"
    assert "(default: bf16 on cuda, fp32 elsewhere)" in precisions_described("train")
    assert precisions_described("embed").endswith("(default: fp32)")


def test_each_record_sets_its_arithmetic_and_restores_it():
    for precision in PRECISIONS.values():
        with precision.computing(CPU):
            assert torch.is_autocast_enabled("cpu") == (precision.autocast is not None)
        assert not torch.is_autocast_enabled("cpu")
    assert not PRECISIONS["tf32"].applies_on(CPU) and PRECISIONS["tf32"].applies_on(CUDA)


def test_a_toy_precision_is_the_embedders_default_and_computes_as_it_says(toy):
    bilm = random_bilm(seed=3)
    embedder = Embedder(bilm, device="cpu")
    assert embedder.precision == TOY.name
    assert embedder.settings()["precision"] == TOY.name  # a file job's identity
    got = embedder.embed_sentences(SENTENCES)
    bf16 = Embedder(bilm, device="cpu", precision="bf16").embed_sentences(SENTENCES)
    fp32 = Embedder(bilm, device="cpu", precision="fp32").embed_sentences(SENTENCES)
    for g, b, f in zip(got, bf16, fp32, strict=True):
        np.testing.assert_array_equal(g, b)
        assert not np.array_equal(g, f)


def test_a_toy_precision_reaches_the_flags_of_embed_and_serve(toy):
    parser = build_parser()
    for argv in (["embed", "m", "in.txt", "out.hdf5"], ["serve"]):
        given = settings_given(parser.parse_args([*argv, "--precision", TOY.name]))
        assert given == EmbedSettings(precision=TOY.name)
    help_text = parser._subparsers._group_actions[0].choices["serve"].format_help()
    assert TOY.name in help_text and "--no-cuda-graphs" in help_text


def test_a_toy_precision_is_the_default_of_training_on_the_cpu(toy, tmp_path, monkeypatch):
    from elmo.cli import main

    train, _ = write_corpus(tmp_path)
    seen = []
    real_lstm = BiLM.run_lstm

    def lstm_spy(self, x, lengths):
        seen.append(torch.is_autocast_enabled("cpu"))
        return real_lstm(self, x, lengths)

    monkeypatch.setattr(BiLM, "run_lstm", lstm_spy)
    out = tmp_path / "run"
    assert main(train_args(train, None, out, "--max-steps", "2")) == 0
    assert seen and all(seen)
    assert tiny_config(train).precision is None  # the run chose it, not the config
    # an explicit precision still wins
    seen.clear()
    assert main(train_args(train, None, tmp_path / "fp32", "--max-steps", "2",
                           "--precision", "fp32")) == 0
    assert seen and not any(seen)
    assert json.loads((out / "run.json").read_text())["config"]["precision"] is None


# A toy that computes in float32 throughout (no TF32, no autocast): `plain`, as fp32 is.
PLAIN = Precision("fp32-toy", "a toy: float32 throughout")


def test_ray_takes_the_plain_precisions_and_names_the_others(monkeypatch, capsys):
    from elmo.cli import main

    monkeypatch.setitem(PRECISIONS, TOY.name, TOY)
    monkeypatch.setitem(PRECISIONS, PLAIN.name, PLAIN)
    assert [p.name for p in PRECISIONS.values() if p.plain] == ["fp32", PLAIN.name]
    with pytest.raises(SystemExit):
        main(["embed", "--ray", "m", "in.txt", "out", "--precision", TOY.name])
    assert f"--precision tf32/bf16/{TOY.name} is not available with --ray" in \
        capsys.readouterr().err
    pytest.importorskip("ray.data")
    from elmo.ray import embed_files

    with pytest.raises(ValueError, match="precision are not for it"):
        embed_files(None, "in.txt", "out", EmbedSettings(precision=TOY.name))
    # a plain one passes the check: the next one (threads) speaks
    with pytest.raises(ValueError, match="threads, block_lines and workers"):
        embed_files(None, "in.txt", "out", EmbedSettings(precision=PLAIN.name), threads=0)
