"""`elmo info MODEL` for every format (EfML: tests/test_efml.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from elmo import save_bilm_tf, save_pretrained
from elmo.cli import main
from elmo.loading.formats.registry import FORMATS
from tests.conftest import REPO, random_bilm


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


def test_the_format_has_one_name_in_text_and_json(tmp_path, capsys):
    save_bilm_tf(random_bilm(), tmp_path / "pair")
    for model, name in (("default", "native"), (tmp_path / "pair", "bilm-tf")):
        assert _info(capsys, model)["format"] == name
        assert main(["info", str(model)]) == 0
        row = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("format "))
        assert row.split(maxsplit=1)[1] == f"{name} ({FORMATS[name].description})"


@pytest.mark.parametrize("args", [["info", "default"], ["info", "--json"]])
def test_a_reader_that_closes_early_ends_any_command_quietly(args):
    # threads given: no note about a busy host on stderr, whatever else the host runs
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "elmo", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # as `| head` does, before the command (still importing) writes
    _, stderr = proc.communicate(timeout=120)
    assert stderr.decode() == "" and proc.returncode == 1


def test_a_broken_pipe_other_than_stdout_is_still_reported(monkeypatch, capsys):
    def run(args, parser):
        raise BrokenPipeError(32, "Broken pipe")  # as a write to a child process may

    monkeypatch.setattr("elmo.cli.info.run", run)
    assert main(["info"]) == 1
    assert capsys.readouterr().err == "elmo: error: [Errno 32] Broken pipe\n"
