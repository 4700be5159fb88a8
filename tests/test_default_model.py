"""The model that ships inside the package: present, small, loadable offline, and sensible."""

from __future__ import annotations

import json
import shlex
import sys

import h5py
import numpy as np
import pytest
from safetensors import safe_open

from elmo.cli import main
from elmo.embed import Embedder
from elmo.loading.resolve import resolve_model, shipped_model_dir
from elmo.training.model_init import load_language_model
from tests.conftest import REPO, require_shared
from tests.helpers.scripts import script_module


def test_default_model_ships_with_a_card_and_stays_small():
    directory = shipped_model_dir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "MODEL_CARD.md", "card.json"):
        assert (directory / name).is_file(), name
    assert (directory / "model.safetensors").stat().st_size < 30 * 2**20
    card = json.loads((directory / "card.json").read_text())
    assert card["perplexity"]["wikitext-2 test"]["average"] < 1000


def test_embedder_and_cli_use_it_with_no_network(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_OFFLINE", "1")
    embedder = Embedder.from_pretrained()
    layers = embedder.embed_sentence("The river bank was muddy .".split())
    assert layers.shape == (3, 6, 256) and np.isfinite(layers).all()
    src = tmp_path / "in.txt"
    src.write_text("The river bank was muddy .\n", encoding="utf-8")
    assert main(["embed", "default", str(src), str(tmp_path / "out.hdf5"), "--quiet"]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        np.testing.assert_allclose(f["0"][...], layers, atol=1e-5)


def test_its_softmax_prefers_real_text_to_shuffled_text():
    lm, vocab = load_language_model(shipped_model_dir())
    from elmo.training.evaluate import evaluate_perplexity

    text = "the city is located on the north bank of the river .".split()
    real = evaluate_perplexity(lm, [text], vocab, 8).average
    shuffled = evaluate_perplexity(lm, [sorted(text)], vocab, 8).average
    assert real < shuffled


@pytest.mark.slow
def test_perplexity_command_on_the_start_of_wikitext2_test_prints_the_cards_figures(tmp_path,
                                                                                   capsys):
    """The acceptance command, `elmo perplexity default FILE --json`, on the first sentences
    of WikiText-2 test: the figures the packaging tool recorded in the card with them. (The
    whole text takes minutes: `benchmarks/shipped_perplexity.py` checks the card's figures.)"""
    test_file = require_shared("data", "wikitext-2", "test.txt")
    card = json.loads((shipped_model_dir() / "card.json").read_text())
    expected = card["perplexity"]["wikitext-2 test"]["first_sentences"]
    assert expected["sentences"] > 64  # more than one batch of the command's
    lines = [line for line in test_file.read_text(encoding="utf-8").splitlines() if line.split()]
    first = tmp_path / "first.txt"
    first.write_text("\n".join(lines[: expected["sentences"]]) + "\n", encoding="utf-8")
    assert main(["perplexity", "default", str(first), "--json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tokens"] == expected["tokens"]
    for direction in ("forward", "backward", "average"):
        assert printed[direction] == pytest.approx(expected[direction], rel=1e-4), direction


@pytest.fixture
def card_tool(monkeypatch):
    """tools/package_default_model.py as a module."""
    return script_module(REPO / "tools" / "package_default_model.py", monkeypatch)


def test_the_card_is_rendered_from_its_facts_with_repository_relative_paths(card_tool):
    directory = shipped_model_dir()
    card = json.loads((directory / "card.json").read_text())
    text = (directory / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert text == card_tool.render(directory, card)  # regenerate: tools/...py --render
    config = card["training"]["config"]
    paths = [*shlex.split(card["command"]), *config["train"], config["valid"],
             *(r["file"] for r in card["perplexity"].values())]
    assert not [p for p in paths if p.startswith("/")], paths
    for key in ("steps", "wall_minutes", "corpus_tokens", "tokens_seen"):
        assert card["training"][key] > 0, key
    for result in card["perplexity"].values():
        assert {"forward", "backward", "average", "tokens"} <= set(result)
        first = result["first_sentences"]
        assert first["sentences"] == card_tool.FIRST_SENTENCES
        assert 0 < first["tokens"] < result["tokens"]
    assert card["tokenizer"] == "whitespace" and "| tokenizer | `whitespace`" in text


def test_the_tool_packages_a_chinese_run_as_default_zh(card_tool, tmp_path, monkeypatch):
    tool = card_tool
    shared = tmp_path / "shared"
    (shared / "zh").mkdir(parents=True)
    lines = ["我们今天去公园散步", "他们明天在家看书", "今天天气很好", "我们在家看书"] * 20
    (shared / "zh" / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (shared / "zh" / "test.txt").write_text("我们今天在家\n他们去公园\n", encoding="utf-8")
    repo = tmp_path / "repo"  # the checkout: its runs/ and ../shared appear relative
    run = repo / "runs" / "zh"
    command = (f"elmo train --train {shared}/zh/train.txt --out {run} --preset tiny "
               f"--valid {shared}/zh/test.txt --eval-every 2 --log-every 1 "
               "--tokenizer chars --max-steps 4 --batch-size 4 --unroll-steps 5 --quiet")
    assert main(shlex.split(command)[1:]) == 0
    (tmp_path / "cmd.txt").write_text(command + "\n")
    monkeypatch.setattr(tool, "SHARED", shared)
    monkeypatch.setattr(tool, "REPO", repo)
    monkeypatch.setattr(tool, "PRETRAINED", tmp_path / "pretrained")
    monkeypatch.setattr(sys, "argv", [
        "package_default_model.py", str(run), "--name", "default-zh", "--command-file",
        str(tmp_path / "cmd.txt"), "--data-name", "Chinese test text",
        "--eval", "held-out=../shared/zh/test.txt"])
    tool.main()
    out = tmp_path / "pretrained" / "default-zh"
    card = json.loads((out / "card.json").read_text())
    assert card["tokenizer"] == "chars" and resolve_model(out).recorded_tokenizer() == "chars"
    assert "--train ../shared/zh/train.txt --out runs/zh " in card["command"]
    assert card["training"]["config"]["train"] == ["../shared/zh/train.txt"]
    curve = card["training"]["validation"]  # perplexity against minutes of training
    assert [v["step"] for v in curve] == [2, 4] and 0 < curve[0]["minutes"] < curve[1]["minutes"]
    held_out = card["perplexity"]["held-out"]
    assert held_out["tokens"] == (6 + 1) + (5 + 1)  # characters, plus </S> per line
    assert held_out["file"] == "../shared/zh/test.txt"
    whole = {k: held_out[k] for k in ("forward", "backward", "average", "tokens")}
    assert held_out["first_sentences"] == {"sentences": 2, **whole}  # the text has only 2
    assert card["fp16_text"] == "the first 2 sentences of held-out"
    assert 0 < card["fp16_max_abs_diff"] < 1e-2 and card["run_dir"] == "runs/zh"
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}
        assert "softmax.weight" in f.keys()
    lm, vocab = load_language_model(out)
    assert "我" in vocab and len(vocab) == lm.softmax.weight.shape[0]
    text = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert text.startswith("# Shipped model `default-zh`: `tiny` biLM trained on Chinese test")
    assert "| held-out | `../shared/zh/test.txt` |" in text and str(tmp_path) not in text
    assert "| text | sentences | forward | backward | average | tokens |\n" in text
    assert f"| held-out | 2 | {held_out['forward']:.1f} | " in text
    assert "Validation during training (`../shared/zh/test.txt`), the perplexity curve:" in text
    assert "| step | epoch | minutes | forward | backward | average |" in text
    assert "\n| 2 | " in text and "\n| 4 | " in text
