"""The analyses' settings: one record per analysis of `elmo analyze`, and the biLM's options
that the analyses embedding with a model share. Each field carries its flag
(`elmo.options.option`), which the command makes from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from elmo.embedding.settings import EmbedSettings
from elmo.loading.formats.registry import FORMATS
from elmo.options import option, option_as

from .probe import TAGGED_FORMATS

DEFAULT_FRACTIONS = (0.001, 0.01, 0.1, 1.0)
DEFAULT_SEEDS = (0, 1, 2)
JSON_HELP = "print one JSON object instead of a table"
OVERWRITE_HELP = "replace an existing output (default: refuse)"
PLOT_HELP = "write the heat map to this PNG file"


def numbers(kind: type) -> Callable[[str], list]:
    """Comma-separated numbers of `kind` (a ValueError that says so for another text)."""
    def parse(text: str) -> list:
        try:
            return [kind(x) for x in text.split(",") if x]
        except ValueError:
            raise ValueError(
                f"{text!r} is not a comma-separated list of {kind.__name__}s") from None
    return parse


@dataclass(frozen=True)
class ModelOptions:
    """The biLM an analysis embeds with, and how it reports."""

    model: str = option(
        "default", "a name `elmo embed` takes (default, small, efml:zhs, ...) or a model "
        f"directory ({', '.join(FORMATS)}) (default: default, the shipped model)")
    batch_size: int = option(64, "sentences per batch (default 64)", parse=int)
    device: str | None = option(None, "torch device (default: cuda if available, else cpu)")
    quantize: str | None = option_as(
        {f.name: f for f in fields(EmbedSettings)}["quantize"])
    json: bool = option(False, JSON_HELP)
    quiet: bool = option(False, "no progress bars")


@dataclass(frozen=True)
class WsdSettings:
    """`elmo analyze wsd`: the sense-annotated data and WordNet."""

    train: str = option(
        None, "sense-annotated text: SemCor in NAF (a tar archive such as semcor3.0_naf.tar.xz, "
        "a directory or a .naf file) or the framework's semcor.data.xml (its .gold.key.txt "
        "beside it)", required=True)
    eval: tuple[str, ...] = option(
        None, "evaluation sets: NAME.data.xml files (NAME.gold.key.txt beside each) or "
        "directories holding them, e.g. the framework's Evaluation_Datasets", required=True,
        nargs="+", metavar="PATH")
    wordnet: str | None = option(
        None, "WordNet 3.0 dict directory (default: $WNSEARCHDIR, else $WNHOME/dict, else "
        "/usr/share/wordnet, where Debian's wordnet-base puts it)")


@dataclass(frozen=True)
class NeighboursSettings:
    """`elmo analyze neighbours`: the corpus, the word in its sentence, the index."""

    corpus: str = option(
        None, "UTF-8 text, one tokenized sentence per line (as `elmo embed` reads)",
        required=True)
    sentence: str = option(None, "the context, tokens separated by spaces", required=True)
    word: str = option(None, "a token of --sentence", required=True)
    occurrence: int = option(
        1, "which occurrence of --word in --sentence (1-based, default 1)", parse=int)
    layer: int | None = option(
        None, "layer for contextual neighbours (default: the top layer)", parse=int)
    k: int = option(5, "neighbours to show (default 5)", parse=int, flag="-k")
    context: int = option(
        12, "tokens shown on each side of a neighbour in the table (default 12)", parse=int)
    index_dir: str | None = option(
        None, "where corpus indexes are kept (default: neighbours/ in $ELMO_CACHE, else "
        "$XDG_CACHE_HOME/elmo, else ~/.cache/elmo)")
    dtype: str = option(
        "float16", "storage of the index's unit vectors (default float16: half the disk; "
        "cosines then differ by ~1e-3 from float32)", choices=("float16", "float32"))


@dataclass(frozen=True)
class ProbeSettings:
    """`elmo analyze probe`: the tagged files, how they are read, the regression."""

    train: str = option(None, "tagged training data (plain or .gz)", required=True,
                        metavar="FILE")
    test: str = option(None, "tagged test data", required=True, metavar="FILE")
    format: str = option(
        next(iter(TAGGED_FORMATS)), " or ".join(
            name + " (default)" * (i == 0) + f" ({fmt.note})" * bool(fmt.note)
            for i, (name, fmt) in enumerate(TAGGED_FORMATS.items())),
        choices=tuple(TAGGED_FORMATS))
    conllu_tag: str = option("upos", "conllu: the tag to probe (default upos)",
                             choices=("upos", "xpos"))
    token_column: int = option(0, "conll: 0-based (default 0)", parse=int)
    tag_column: int = option(
        -1, "conll: 0-based, negative from the end (default -1, the last)", parse=int)
    encoding_errors: str = option(
        "strict", "strict: stop at a line that is not UTF-8 (default); replace",
        choices=("strict", "replace"))
    c: float = option(1.0, "inverse L2 regularisation strength (default 1.0)", parse=float)
    max_iter: int = option(300, "L-BFGS iterations (default 300)", parse=int)


@dataclass(frozen=True)
class LayerWeightsSettings:
    """`elmo analyze layer-weights`: the task runs, the heat map."""

    run_dirs: tuple[str, ...] = option(None, None, positional=True, nargs="+",
                                       metavar="RUN_DIR")
    plot: str | None = option(None, PLOT_HELP, metavar="PNG")
    overwrite: bool = option(False, OVERWRITE_HELP)
    json: bool = option(False, JSON_HELP)


@dataclass(frozen=True)
class SampleEfficiencySettings:
    """`elmo analyze sample-efficiency`: the runs, fractions and seeds, the plot."""

    out: str = option(None, "directory of the runs", required=True, metavar="DIR")
    model: str = option(
        "default", "the biLM for +ELMo (any name `elmo embed` takes; default: default)")
    fractions: tuple[float, ...] = option(
        DEFAULT_FRACTIONS, "fractions of the training data (default "
        f"{','.join(f'{f:g}' for f in DEFAULT_FRACTIONS)})", parse=numbers(float),
        metavar="F[,F...]")
    seeds: tuple[int, ...] = option(
        DEFAULT_SEEDS, f"seeds (default {','.join(map(str, DEFAULT_SEEDS))})",
        parse=numbers(int), metavar="S[,S...]")
    plot: str | None = option(None, "write the plot (error bars: std over seeds)",
                              metavar="PNG")
    overwrite: bool = option(False, OVERWRITE_HELP)
    jobs: int = option(
        1, "runs at a time, each in its own process with its share of the torch threads; N = "
        "the number of cores is fastest for small task models (default 1)", parse=int,
        metavar="N")
    json: bool = option(False, JSON_HELP)
    quiet: bool = option(False, "no progress bars")
    task_options: tuple[str, ...] = option(
        None, None, positional=True, nargs="...", metavar="-- TASK_TRAIN_OPTIONS")
