"""Options that several subcommands share, with one wording."""

from __future__ import annotations

import argparse

from elmo.modules.quantize import QUANTIZE_MODES
from elmo.tokenize import TOKENIZER_NAMES


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_overwrite(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output (default: refuse)")


def add_tokenizer(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizer", choices=TOKENIZER_NAMES, default=None,
                   help="how lines become tokens (default: the one MODEL was trained with, "
                   "recorded in its run.json by `elmo train`; else whitespace)")


def add_quantize(p: argparse.ArgumentParser) -> None:
    """--quantize for commands that run a biLM for inference (embed, serve, analyze)."""
    p.add_argument("--quantize", choices=QUANTIZE_MODES, default=None,
                   help="int8: int8 weights and dynamically quantized activations on the CPU, "
                   "~2-4x faster for large models, vectors within ~1%% of fp32 (docs/speed.md). "
                   "Default: fp32")
