"""`elmo export MODEL model.onnx` (or `--format onnx`): the ONNX target of `elmo export`."""

from __future__ import annotations

import argparse
from pathlib import Path

from elmo.cli.common import add_layers

SUFFIX = ".onnx"  # an OUTDIR ending in it is the graph's file
ONNX_NAME = f"model{SUFFIX}"  # written into OUTDIR when it does not end in SUFFIX


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layers(p, "onnx: what the graph outputs, every layer or one (batch, tokens, width) "
               "tensor (D = 2P)")


def write(args: argparse.Namespace) -> Path:
    """Write the graph; returns its path."""
    from elmo.onnx import export_onnx  # only here: the onnx extra may not be installed

    path = Path(args.out_dir)
    if path.suffix != SUFFIX:
        path = path / ONNX_NAME
    export_onnx(args.model, path, layers=args.layers, overwrite=args.overwrite)
    return path
