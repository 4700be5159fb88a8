"""Options that several subcommands share, with one wording."""

from __future__ import annotations

import argparse

from elmo import layer_choice
from elmo.io.inputs import AUTO, INPUT_FORMATS, INPUT_KINDS
from elmo.loading.formats.registry import formats_described
from elmo.loading.resolve import ModelFiles, resolve_model
from elmo.modules.quantize import QUANTIZE_MODES
from elmo.tokenize import TOKENIZERS, tokenizers_described

MODEL_HELP = ("a shipped name (default, default-zh), a released name (small, medium, original, "
              "original-5.5B, efml:<lang> such as efml:zhs), a Hugging Face Hub model "
              "(hf:OWNER/REPO[/SUB/DIR][@REVISION]), or a directory in one of the formats "
              + formats_described())


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_overwrite(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output (default: refuse)")


def add_input_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-format", choices=INPUT_FORMATS, default=AUTO,
                   help="how the text files are read: " + "; ".join(
                       f"{k.name}: {k.description}" for k in INPUT_KINDS.values())
                   + ". JSON lines and WikiExtractor paragraphs are split into sentences "
                   "(English: sentencex; with --tokenizer jieba or chars: after 。！？). "
                   "auto: each file as its name or first line says, text otherwise "
                   "(default auto)")


def add_vocab_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--vocab, or how the vocabulary is built from the training files."""
    p.add_argument("--vocab", metavar="FILE",
                   help="bilm-tf vocabulary file (default: built from the training files)")
    p.add_argument("--min-count", type=int, default=1, metavar="N",
                   help="building the vocabulary: keep words seen N times (default 1)")
    p.add_argument("--max-vocab", type=int, metavar="N",
                   help="building the vocabulary: keep the N most frequent words "
                   "(default: all)")


def add_tokenizer(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizer", choices=TOKENIZERS, default=None,
                   help=f"how lines become tokens ({tokenizers_described()}; default: the one "
                   "MODEL was trained with, recorded in its run.json by `elmo train`; else "
                   "whitespace)")


def add_corpus_tokenizer(p: argparse._ActionsContainer, note: str = "") -> None:
    """--tokenizer of a command that reads a corpus (default whitespace); `note`: what else
    the help says."""
    p.add_argument("--tokenizer", choices=TOKENIZERS, default="whitespace",
                   help=f"how lines become tokens ({tokenizers_described()}; default "
                   f"whitespace){note}")


def add_layers(p: argparse._ActionsContainer, what: str) -> None:
    """--layers, a layer choice (`elmo.layer_choice`; default all), checked as it is parsed;
    `what`: what it decides."""
    p.add_argument("--layers", type=_layer_choice, default="all",
                   metavar="|".join(kind.form for kind in layer_choice.LAYER_CHOICES),
                   help=f"{what}: {layer_choice.forms_help()}. Default: all")


def _layer_choice(text: str) -> str:
    """`text` once a layer choice accepts it (argparse prints the message with the option)."""
    try:
        layer_choice.parse_layer_choice(text)
    except layer_choice.LayerChoiceError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_quantize(p: argparse.ArgumentParser) -> None:
    """--quantize for commands that run a biLM for inference (embed, serve, analyze)."""
    p.add_argument("--quantize", choices=QUANTIZE_MODES, default=None,
                   help="int8: int8 weights and dynamically quantized activations on the CPU, "
                   "~1.9-2.2x faster than fp32 for large models (original), with VNNI or "
                   "AVX2 alone, little faster for small ones; vectors within ~2%% of fp32 "
                   "(docs/speed.md). "
                   "Default: fp32")


def add_official_pair(p: argparse.ArgumentParser) -> None:
    """--options and --weights (AllenNLP's --options-file, --weight-file), instead of MODEL."""
    p.add_argument("--options", "--options-file", dest="options",
                   help="official options.json (with --weights, instead of MODEL)")
    p.add_argument("--weights", "--weight-file", dest="weights",
                   help="official weights.hdf5 (with --options)")


def model_files(model: str | None, args: argparse.Namespace) -> ModelFiles:
    """MODEL, or the pair --options/--weights, resolved (nothing is downloaded yet)."""
    return resolve_model(model, options=args.options, weights=args.weights)
