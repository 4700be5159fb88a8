"""Task data sets in their usual formats: CoNLL columns and CoNLL-U
(`elmo.tasks.conll_readers`), label-text and TSV (`elmo.tasks.text_readers`), SQuAD-layout JSON
(`elmo.tasks.squad`), NLI JSON lines (`elmo.tasks.nli`) and CoNLL-2012 (`elmo.tasks.srl_data`,
`elmo.tasks.coref_data`), one `DatasetFormat` record each in `FORMATS`.

Every reader takes a plain, ``.gz`` or ``.xz`` UTF-8 file and returns a list of examples, each
remembering the 1-based line it starts on and its source lines, so predictions can be
written back in the input's format (:func:`write_predictions`). Bad input raises
:class:`~elmo.errors.InputFileError` naming the file and line. `elmo task` (its options, the
recipe, the run) reads the table: a new format is a reader and one record here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmo.io.atomic import atomic_write_text
from elmo.io.textfile import strip_compression
from elmo.tasks.conll_readers import (
    CONLLU_TAGS,
    SCHEMES,
    read_conll,
    read_conllu,
    write_conll,
    write_conllu,
)
from elmo.tasks.coref_data import CorefSegment, read_coref
from elmo.tasks.examples import LabeledPair, LabeledText, TaggedSentence
from elmo.tasks.ner_data import read_ner, write_ner
from elmo.tasks.nli import NLI_LABELS, nli_notes, read_nli, write_nli
from elmo.tasks.reader_lines import numbered_lines
from elmo.tasks.squad import SquadQuestion, read_squad
from elmo.tasks.srl_data import SrlInstance, read_srl
from elmo.tasks.text_readers import (
    read_label_text,
    read_tsv,
    tsv_labels_there,
    tsv_problem,
    warn_missing_placeholders,
    write_label_text,
    write_tsv,
)

__all__ = ["CONLLU_TAGS", "FORMATS", "SCHEMES", "DatasetFormat", "Example",
           "LabeledPair", "LabeledText", "TaggedSentence", "dataset_format", "format_of_name",
           "formats_help", "numbered_lines", "read_conll", "read_conllu", "read_dataset",
           "read_label_text", "read_tsv", "write_predictions"]

Example = TaggedSentence | LabeledText | LabeledPair


def _no_problem(options: Mapping[str, Any], task: Any | None) -> str | None:
    return None


def _nothing_to_check(path: str | Path, examples: list, found: Any) -> None:
    return None


def _no_notes(examples: list) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class DatasetFormat:
    """A format of `elmo task` data: its `name` (`--format`), `help` (one line), `read(path,
    **options)` -> examples, the reader's `options` (TaskConfig fields and `elmo task`
    options of the same names, besides `encoding_errors`), the `examples` it reads into (a
    task type reads the formats that give its `example`), the `suffixes` a file name is told
    by (plain or .gz) when --format is not given, and `write(examples, predictions, options)`
    -> the lines of the input with the predictions in (None: the task type writes them).
    `problem(options, task)`: what the options lack (None: nothing; `task` None: the text of
    the file alone); `check_labeled(path, examples, options)`: a labeled split lacks what
    training or scoring needs; `check_unlabeled(path, examples, labels)`: warn about an
    input to predict that looks misread. `unlabeled`: the reader's options for an input
    to predict (no tag check, no line left out); `notes(examples)`: facts about a split
    that the run records (lines skipped)."""

    name: str
    help: str
    read: Callable[..., list]
    options: tuple[str, ...]
    examples: tuple[type, ...]
    suffixes: tuple[str, ...] = ()
    write: Callable[[list, list, Mapping[str, Any]], list[str]] | None = None
    problem: Callable[[Mapping[str, Any], Any], str | None] = _no_problem
    check_labeled: Callable[[str | Path, list, Mapping[str, Any]], None] = _nothing_to_check
    check_unlabeled: Callable[[str | Path, list, Sequence[str]], None] = _nothing_to_check
    unlabeled: Mapping[str, Any] = field(default_factory=dict)
    notes: Callable[[list], dict[str, Any]] = _no_notes

    @property
    def tokenizes(self) -> bool:
        """Whether it splits raw text (with --tokenizer), rather than reading tokens."""
        return "tokenizer" in self.options

    def reader_options(self, values: Mapping[str, Any], labeled: bool = True
                       ) -> dict[str, Any]:
        """The reader's keywords from `values` (a config's or the command's options; the
        reader's default for one the command lacks, as `elmo task text` lacks --task); not
        `labeled`: with the `unlabeled` options."""
        options = {name: values[name] for name in self.options if name in values}
        return {**options, **({} if labeled else self.unlabeled),
                "encoding_errors": values["encoding_errors"]}


# --format conll2012: the examples of each task type that reads it, from a file or folder
CONLL2012_EXAMPLES: dict[str, Callable[[str | Path, int, str], list]] = {
    "srl": lambda path, segment_words, encoding_errors: read_srl(path, encoding_errors),
    "coref": read_coref,
    "tagging": lambda path, segment_words, encoding_errors: read_ner(path, encoding_errors),
}


def read_conll2012_examples(path: str | Path, task: str = "srl", segment_words: int = 512,
                            encoding_errors: str = "strict") -> list:
    """A CoNLL-2012 file (or folder) as `task`'s examples: SRL instances, one per predicate
    (also for `elmo task text`, which has no --task), coreference segments of at most
    `segment_words` words, or sentences tagged with their named entities (BIO)."""
    return CONLL2012_EXAMPLES[task](path, segment_words, encoding_errors)


FORMATS: dict[str, DatasetFormat] = {f.name: f for f in (
    DatasetFormat("conll", "token per line, white-space columns, blank line between sentences",
                  read_conll, ("token_column", "tag_column", "scheme"), (TaggedSentence,),
                  (".conll",), write_conll, unlabeled={"scheme": None}),
    DatasetFormat("conllu", "CoNLL-U, 10 tab-separated fields per word", read_conllu,
                  ("tag",), (TaggedSentence,), (".conllu",), write_conllu),
    DatasetFormat("label-text", "'LABEL sentence' per line", read_label_text, ("tokenizer",),
                  (LabeledText,), (), write_label_text,
                  check_unlabeled=warn_missing_placeholders),
    DatasetFormat("tsv", "header row, tab-separated columns", read_tsv,
                  ("text_columns", "label_column", "tokenizer"), (LabeledText, LabeledPair),
                  (".tsv",), write_tsv, problem=tsv_problem,
                  check_labeled=tsv_labels_there),
    DatasetFormat("squad", "SQuAD-layout JSON (v1.1, v2.0, CMRC 2018)", read_squad,
                  ("tokenizer",), (SquadQuestion,), (".json",)),
    DatasetFormat("nli", "SNLI/MultiNLI JSON lines: sentence1, sentence2, gold_label (lines "
                  "labelled - are skipped) or premise, hypothesis, label (a word, or 0/1/2: "
                  f"{'/'.join(NLI_LABELS)})", read_nli, ("tokenizer",), (LabeledPair,), (),
                  write_nli, unlabeled={"skip_unlabeled": False}, notes=nli_notes),
    DatasetFormat("conll2012", "CoNLL-2012 *_gold_conll (OntoNotes): a file or a folder",
                  read_conll2012_examples, ("task", "segment_words"),
                  (SrlInstance, CorefSegment, TaggedSentence), (".gold_conll",), write_ner),
)}


def dataset_format(name: str) -> DatasetFormat:
    """The record of format `name`; ValueError naming the formats for another."""
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; choose one of: {', '.join(FORMATS)}")
    return FORMATS[name]


def format_of_name(path: str | Path) -> str | None:
    """The format a file's name tells by its suffix (after .gz or .xz), None when none does."""
    suffix = Path(strip_compression(str(path))).suffix.lower()
    return next((f.name for f in FORMATS.values() if suffix and suffix in f.suffixes), None)


def formats_help() -> str:
    """Each format with its help and suffixes, for --format's help."""
    return "; ".join(f"{f.name}: {f.help}" + (f" ({', '.join(f.suffixes)})" if f.suffixes
                                              else "") for f in FORMATS.values())


def read_dataset(path: str | Path, format: str, **options) -> list:
    """Read `path` in `format` (a key of FORMATS) with that reader's keyword options."""
    return dataset_format(format).read(path, **options)


def write_predictions(
    path: str | Path, format: str, examples: list, predictions: list, **options
) -> None:
    """Write `examples` back in `format` with their tags or labels replaced by `predictions`
    (added where the input had none), atomically. `options` are the reader's options."""
    write = dataset_format(format).write
    if write is None:
        raise ValueError(f"format {format!r} has no writer of predictions")
    atomic_write_text(path, "\n".join(write(examples, predictions, options)) + "\n")
