"""Options that several subcommands share, with one wording."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import MISSING, Field, fields
from typing import Any

from elmo.embedding.settings import EmbedSettings
from elmo.io.inputs import AUTO, INPUT_FORMATS, INPUT_KINDS
from elmo.io.titles import TITLE_LISTS
from elmo.loading.model_files import ModelFiles
from elmo.loading.resolve import resolve_model, sources_described
from elmo.options import is_option
from elmo.tokenize import DEFAULT_TOKENIZER, TOKENIZERS, tokenizers_described
from elmo.vocab import SPECIAL_TOKENS


def model_help() -> str:
    """What a MODEL may be, for help texts: one phrase per source of models."""
    return sources_described()


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


def add_exclude_titles(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--exclude-titles: documents left out by title (a test set's articles)."""
    p.add_argument("--exclude-titles", nargs="+", metavar="FILE",
                   help="leave out the documents whose title one of these files names: "
                   + "; ".join(f"{k.name}: {k.description}" for k in TITLE_LISTS.values())
                   + ". Titles are compared normalized (WikiText's @-@ @,@ @.@ joined, the "
                   "spaces around punctuation, case and HTML entities ignored; WikiText's "
                   "<unk> is any one word). Only documents with a title (WikiExtractor's, a "
                   "JSON line's \"title\") can be left out; text lines and FASTA records are "
                   "kept (default: none)")


def add_vocab_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--vocab, or how the vocabulary is built from the training files."""
    p.add_argument("--vocab", metavar="FILE",
                   help="bilm-tf vocabulary file (default: built from the training files)")
    p.add_argument("--min-count", type=int, default=1, metavar="N",
                   help="building the vocabulary: keep words seen N times (default 1)")
    p.add_argument("--max-vocab", type=int, metavar="N",
                   help="building the vocabulary: keep the N most frequent words "
                   "(default: all)")


def check_vocab_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Refuse what `add_vocab_options` cannot build: a vocabulary holds the special tokens and
    at least one word."""
    if args.min_count < 1:
        parser.error("--min-count must be at least 1")
    least = len(SPECIAL_TOKENS) + 1
    if args.max_vocab is not None and args.max_vocab < least:
        parser.error(f"--max-vocab must be at least {least} ({', '.join(SPECIAL_TOKENS)} and "
                     "a word)")


def add_option(p: argparse._ActionsContainer, option: Field, what: str | None = None) -> None:
    """The flag of `option`, a field made by `elmo.options.option`: its default, help,
    choices and how its value is read (the field's metadata); `what`: what it decides in this
    command, before its help."""
    meta, name = option.metadata, option.name
    help = meta["help"] if what is None else f"{what}: {meta['help']}"
    flag = meta["flag"] or f"--{name.replace('_', '-')}"
    if isinstance(option.default, bool) and not meta["negatable"]:  # a switch
        if option.default:  # on unless --no-NAME
            p.add_argument(f"--no-{name.replace('_', '-')}", dest=name, action="store_false",
                           help=help)
        else:
            p.add_argument(flag, dest=name, action="store_true", help=help)
        return
    if meta["negatable"]:  # --NAME, --no-NAME or neither (the default, None or a bool)
        p.add_argument(flag, action=argparse.BooleanOptionalAction, default=option.default,
                       help=help)
        return
    parse = meta["parse"]  # a type (int) as argparse takes it, its messages its own
    given = {"choices": meta["choices"], "metavar": meta["metavar"], "nargs": meta["nargs"],
             "type": None if parse is None else
             parse if isinstance(parse, type) else _read_with(parse)}
    default = None if option.default is MISSING else option.default
    if meta["positional"]:
        p.add_argument(name, default=default, help=help,
                       **{k: v for k, v in given.items() if v is not None})
    else:
        p.add_argument(flag, dest=name, default=default, help=help,
                       required=meta["required"] or False,
                       **{k: v for k, v in given.items() if v is not None})


def add_options(p: argparse._ActionsContainer, record: type,
                names: Iterable[str] | None = None) -> None:
    """`add_option` for each field of `record` named in `names` (default: every field that
    carries a flag), in order."""
    options = {f.name: f for f in fields(record) if is_option(f)}
    for name in options if names is None else names:
        add_option(p, options[name])


def options_given(args: argparse.Namespace, record: type, **more: Any) -> Any:
    """The `record` of the flags `add_option` made from its fields that `args` holds, and
    `more` fields."""
    given = {f.name: getattr(args, f.name) for f in fields(record)
             if is_option(f) and hasattr(args, f.name)}
    return record(**given, **more)


def add_setting(p: argparse._ActionsContainer, name: str, what: str | None = None) -> None:
    """--NAME from the field NAME of `EmbedSettings` (`add_option`)."""
    add_option(p, _SETTINGS[name], what)


def add_settings(p: argparse._ActionsContainer, names: Iterable[str]) -> None:
    """`add_setting` for each of `names`, in order."""
    add_options(p, EmbedSettings, names)


def settings_given(args: argparse.Namespace, settings: type = EmbedSettings, **more: Any
                   ) -> Any:
    """The `settings` record (EmbedSettings or a subclass) of the flags `add_setting` made
    that `args` holds, and `more` fields."""
    return options_given(args, settings, **more)


_SETTINGS: dict[str, Field] = {f.name: f for f in fields(EmbedSettings) if f.init}


def _read_with(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` as an argparse type, its ValueError's message printed with the option."""
    def read(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    read.__name__ = parse.__name__  # what argparse names in its own messages
    return read


def add_tokenizer(p: argparse.ArgumentParser) -> None:
    add_setting(p, "tokenizer")


def add_corpus_tokenizer(p: argparse._ActionsContainer, note: str = "") -> None:
    """--tokenizer of a command that reads a corpus (default `DEFAULT_TOKENIZER`); `note`: what
    else the help says."""
    p.add_argument("--tokenizer", choices=TOKENIZERS, default=DEFAULT_TOKENIZER,
                   help=f"how lines become tokens ({tokenizers_described()}; default "
                   f"{DEFAULT_TOKENIZER}){note}")


def add_layers(p: argparse._ActionsContainer, what: str) -> None:
    """--layers, a layer choice (`elmo.layer_choice`; default all), checked as it is parsed;
    `what`: what it decides."""
    add_setting(p, "layers", what)


def add_quantize(p: argparse.ArgumentParser) -> None:
    """--quantize for commands that run a biLM for inference (embed, serve, analyze)."""
    add_setting(p, "quantize")


def add_official_pair(p: argparse.ArgumentParser) -> None:
    """--options and --weights (AllenNLP's --options-file, --weight-file), instead of MODEL."""
    p.add_argument("--options", "--options-file", dest="options",
                   help="official options.json (with --weights, instead of MODEL)")
    p.add_argument("--weights", "--weight-file", dest="weights",
                   help="official weights.hdf5 (with --options)")


def model_files(model: str | None, args: argparse.Namespace) -> ModelFiles:
    """MODEL, or the pair --options/--weights, resolved (nothing is downloaded yet)."""
    return resolve_model(model, options=args.options, weights=args.weights)
