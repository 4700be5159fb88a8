"""`elmo info MODEL` for every format (EfML: tests/test_efml.py)."""

from __future__ import annotations

import json

from elmo import save_bilm_tf, save_pretrained
from elmo.cli import main
from tests.conftest import random_bilm


def _info(capsys, *args) -> dict:
    assert main(["info", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_info_of_the_shipped_model_and_our_format(tmp_path, capsys):
    info = _info(capsys, "default")
    assert info["format"] == "native" and info["tokenizer"] == "whitespace"
    assert info["softmax_rows"] > 1000  # the shipped model keeps its softmax
    assert info["architecture"]["token_encoder"]["kind"] == "bytes"
    path = save_pretrained(random_bilm(), tmp_path / "ours")
    info = _info(capsys, path)
    assert info["loaded_from"] == [str(path)] and info["softmax_rows"] is None
    arch = info["architecture"]
    assert (arch["lstm_layers"], arch["lstm_dim"], arch["projection_dim"]) == (2, 64, 16)
    assert arch["output_layers"] == 3 and arch["output_dim"] == 32
    assert arch["parameters"] == sum(p.numel() for p in random_bilm().parameters())


def test_info_of_an_official_pair(tmp_path, capsys):
    options, weights = save_bilm_tf(random_bilm(), tmp_path / "pair")
    info = _info(capsys, tmp_path / "pair")
    assert info["format"] == "bilm-tf" and info["loaded_from"] == [str(options), str(weights)]
    assert main(["info", str(tmp_path / "pair")]) == 0
    out = capsys.readouterr().out
    assert "bilm-tf" in out and "UTF-8 bytes" in out and "softmax" in out
