"""`elmo export`: write a biLM in the official bilm-tf format (options.json + weights.hdf5)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from elmo.formats.bilm_tf import save_bilm_tf
from elmo.formats.native import VOCAB_NAME
from elmo.pretrained import load_bilm, model_vocab_file

FORMATS = ("bilm-tf",)


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(
        name,
        help="export a biLM to the official bilm-tf format",
        description="Write MODEL (a directory from `elmo train` or in our format, a released "
        "name, or a directory with an options/weights pair) to OUTDIR as options.json + "
        "weights.hdf5, plus vocab.txt when MODEL has one. The softmax is not exported (the "
        "official prediction files have none).",
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument("out_dir", metavar="OUTDIR")
    p.add_argument("--format", choices=FORMATS, default="bilm-tf", help="default bilm-tf")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    bilm = load_bilm(args.model)
    written = list(save_bilm_tf(bilm, args.out_dir))
    vocab = model_vocab_file(args.model)
    if vocab is not None:
        written.append(Path(shutil.copyfile(vocab, Path(args.out_dir) / VOCAB_NAME)))
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0
