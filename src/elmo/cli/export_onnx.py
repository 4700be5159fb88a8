"""`elmo export MODEL model.onnx` (or `--format onnx`): the ONNX target of `elmo export`."""

from __future__ import annotations

import argparse
from pathlib import Path

from elmo.cli.common import add_layers

ONNX_NAME = "model.onnx"  # written into OUTDIR when it does not end in .onnx


def wants_onnx(args: argparse.Namespace) -> bool:
    """Whether `elmo export` writes ONNX: --format onnx, or an output ending in .onnx."""
    return args.format == "onnx" or (args.format is None and args.out_dir.endswith(".onnx"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_layers(p, "onnx: what the graph outputs, every layer or one (batch, tokens, width) "
               "tensor (D = 2P)")


def write(args: argparse.Namespace) -> Path:
    """Write the graph; returns its path."""
    from elmo.onnx import export_onnx  # only here: the onnx extra may not be installed

    path = Path(args.out_dir)
    if path.suffix != ".onnx":
        path = path / ONNX_NAME
    export_onnx(args.model, path, layers=args.layers, overwrite=args.overwrite)
    return path
