"""A target of `elmo export` is one record in `TARGETS`: a throwaway target added there is
chosen by OUTDIR or --format, written, reported, offered in the help, and its option is
refused for the other targets, while the others keep theirs."""

from __future__ import annotations

import argparse
import json

import pytest

from elmo import load_model, save_pretrained
from elmo.cli import export, main
from elmo.io.atomic import atomic_write_text
from tests.conftest import random_bilm

SUFFIX = ".sizes.json"


class SizesTarget(export.ExportTarget):
    """A JSON file of the biLM's sizes: OUTDIR ending in .sizes.json, or --format sizes."""

    format = "sizes"
    rule = f"OUTDIR ends in {SUFFIX}"
    where = "--format sizes"
    options = ("sizes_indent",)

    def help(self) -> str:
        return f"An OUTDIR ending in {SUFFIX} gets the biLM's sizes."

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--sizes-indent", type=int, default=None)

    def takes(self, args: argparse.Namespace) -> bool:
        return args.format == self.format or (args.format is None
                                              and args.out_dir.endswith(SUFFIX))

    def write(self, args: argparse.Namespace) -> str:
        config = load_model(args.model).bilm.config
        sizes = {"layers": config.n_layers, "projection_dim": config.projection_dim}
        atomic_write_text(args.out_dir, json.dumps(sizes, indent=args.sizes_indent))
        return self.wrote(args, [args.out_dir])


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "TARGETS", [*export.TARGETS, SizesTarget()])
    return str(save_pretrained(random_bilm(seed=3), tmp_path / "model"))


def test_an_added_target_is_taken_by_its_outdir_and_by_its_format(model, tmp_path, capsys):
    out = str(tmp_path / f"tiny{SUFFIX}")
    assert main(["export", model, out]) == 0
    assert capsys.readouterr().err == (
        f"wrote sizes (OUTDIR ends in {SUFFIX}; --format bilm-tf or native or onnx for "
        f"another): {out}\n")
    config = random_bilm(seed=3).config
    assert json.loads((tmp_path / f"tiny{SUFFIX}").read_text()) == {
        "layers": config.n_layers, "projection_dim": config.projection_dim}
    other = str(tmp_path / "sizes.txt")
    assert main(["export", model, other, "--format", "sizes", "--sizes-indent", "2"]) == 0
    assert capsys.readouterr().err == f"wrote sizes: {other}\n"
    assert (tmp_path / "sizes.txt").read_text().startswith('{\n  "layers"')


def test_the_other_targets_keep_their_outdirs_and_refuse_its_option(model, tmp_path, capsys):
    assert main(["export", model, str(tmp_path / "tf")]) == 0
    assert capsys.readouterr().err.startswith("wrote bilm-tf (the default for an OUTDIR not "
                                              "ending in .onnx; --format native or onnx or "
                                              "sizes for another)")
    with pytest.raises(SystemExit):
        main(["export", model, str(tmp_path / "tf2"), "--sizes-indent", "2"])
    assert "--sizes-indent applies to --format sizes only" in capsys.readouterr().err
    assert not (tmp_path / "tf2").exists()


def test_an_added_target_is_in_the_help(model, capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"An OUTDIR ending in {SUFFIX} gets the biLM's sizes." in help_text
    assert "{bilm-tf,native,onnx,sizes}" in help_text
    assert f"sizes (OUTDIR ends in {SUFFIX})" in help_text
