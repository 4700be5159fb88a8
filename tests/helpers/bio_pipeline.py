"""Helpers of the tests of `elmo bio-embeddings` on configs and folders it must not trust:
small configs, a FASTA file, a working directory, and the one-line refusal."""

from __future__ import annotations

import random
from pathlib import Path

from elmo import save_bilm_tf
from elmo.cli import main
from tests.conftest import random_bilm

RESIDUES = "ACDEFGHIKLMNPQRSTVWY"
GLOBAL = "global:\n  sequences_file: fasta.fa\n  prefix: my_job\n"
EMBED = """emb:
  type: embed
  protocol: seqvec
  weights_file: model/weights.hdf5
  options_file: model/options.json
  reduce: True
"""
TSNE = """tsne:
  type: project
  protocol: tsne
  depends_on: emb
  perplexity: 2
  n_iter: 250
"""
PLOT = """plot:
  type: visualize
  protocol: plotly
  depends_on: tsne
"""


def save_model_pair(directory: Path) -> Path:
    """A small random biLM as bilm-tf's options/weights pair in `directory`."""
    save_bilm_tf(random_bilm(seed=7), directory)
    return directory


def prepare_job(directory: Path, model_pair: Path) -> Path:
    """`directory` with fasta.fa (6 proteins) and model/ (a link to `model_pair`)."""
    (directory / "model").symlink_to(model_pair)
    write_fasta(directory, 6)
    return directory


def write_fasta(directory: Path, n: int) -> None:
    rng = random.Random(n)
    (directory / "fasta.fa").write_text("".join(
        f">P{i} protein {i}\n{''.join(rng.choices(RESIDUES, k=rng.randint(20, 50)))}\n"
        for i in range(n)))


def write_config(directory: Path, text: str) -> Path:
    path = directory / "config.yml"
    path.write_text(text, encoding="utf-8")
    return path


def one_line_error(config: Path, capsys, *flags: str) -> str:
    """What `elmo bio-embeddings` prints for a config it refuses: one line, no traceback
    (after the warnings, if any)."""
    capsys.readouterr()
    assert main(["bio-embeddings", str(config), "--quiet", *flags]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines()
             if not line.startswith("elmo: warning: ")]
    assert len(lines) == 1 and lines[0].startswith("elmo: error: "), lines
    return lines[0]
