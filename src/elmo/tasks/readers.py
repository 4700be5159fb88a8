"""Task data sets in their usual formats: CoNLL columns, CoNLL-U, label-text, TSV,
SQuAD-layout JSON (`elmo.tasks.squad`), NLI JSON lines (`elmo.tasks.nli`) and CoNLL-2012
(`elmo.tasks.srl_data`, `elmo.tasks.coref_data`), one `DatasetFormat` record each in `FORMATS`.

Every reader takes a plain, ``.gz`` or ``.xz`` UTF-8 file and returns a list of examples, each
remembering the 1-based line it starts on and its source lines, so predictions can be
written back in the input's format (:func:`write_predictions`). Bad input raises
:class:`~elmo.errors.InputFileError` naming the file and line. `elmo task` (its options, the
recipe, the run) reads the table: a new format is a reader and one record here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elmo.errors import InputFileError
from elmo.io.atomic import atomic_write_text
from elmo.io.textfile import read_lines, strip_compression
from elmo.tasks.coref_data import CorefSegment, read_coref
from elmo.tasks.examples import LabeledPair, LabeledText, TaggedSentence
from elmo.tasks.nli import NLI_LABELS, nli_notes, read_nli, write_nli
from elmo.tasks.squad import SquadQuestion, read_squad
from elmo.tasks.srl_data import SrlInstance, read_srl
from elmo.tokenize import get_tokenizer

SCHEMES = ("iob1", "iob2", "bioes")
CONLLU_TAGS = {"upos": 3, "xpos": 4}
DOCSTART = "-DOCSTART-"


Example = TaggedSentence | LabeledText | LabeledPair


def numbered_lines(path: str | Path, encoding_errors: str = "strict") -> Iterator[tuple[int, str]]:
    """(1-based number, text without its line ending) for every line of a plain or .gz file:
    `elmo.io.textfile.read_lines`, the project's one text reader (a line that is not UTF-8
    raises InputFileError naming the file and line, unless `encoding_errors="replace"`)."""
    for number, text in read_lines(path, encoding_errors):
        yield number + 1, text


def _blocks(path: Path, encoding_errors: str) -> Iterator[list[tuple[int, str]]]:
    """Groups of consecutive non-blank lines (sentences of the CoNLL formats)."""
    block: list[tuple[int, str]] = []
    for number, text in numbered_lines(path, encoding_errors):
        if text.strip():
            block.append((number, text))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _check_tags(path: Path, number: int, tag: str, scheme: str | None) -> None:
    """A tag must be O or PREFIX-TYPE with a prefix of `scheme` (no check for None)."""
    if scheme is None or tag == "O":
        return
    prefixes = {"iob1": "IB", "iob2": "IB", "bioes": "BIES"}[scheme]
    if len(tag) < 3 or tag[1] != "-" or tag[0] not in prefixes:
        raise InputFileError(
            f"{path}, line {number}: tag {tag!r} is not O or one of "
            f"{', '.join(p + '-TYPE' for p in prefixes)} as --scheme {scheme} expects"
        )


def _tag_index(n_columns: int, token_column: int, tag_column: int) -> int | None:
    """Index of the tag column in a row of `n_columns`, None when the row has none."""
    index = tag_column if tag_column >= 0 else n_columns + tag_column
    if index < 0 or index >= n_columns or index == token_column % n_columns:
        return None
    return index


def _nonempty(path: Path, examples: list, what: str) -> list:
    if not examples:
        raise InputFileError(f"{path} holds no {what}; check the file and --format")
    return examples


RowParser = Callable[[int, str, TaggedSentence], tuple[str | None, str | None]]


def _read_tagged(path: Path, encoding_errors: str, parse_row: RowParser) -> list[TaggedSentence]:
    """Sentences of blank-line-separated blocks; `parse_row(number, text, sentence so far)`
    gives each line's token and tag (None, None for a line without a token)."""
    sentences = []
    for block in _blocks(path, encoding_errors):
        sentence = TaggedSentence([], [], line=block[0][0])
        for number, text in block:
            sentence.add_row(text, *parse_row(number, text, sentence))
        if sentence.tokens:
            sentences.append(sentence)
    return _nonempty(path, sentences, "sentences")


def read_conll(
    path: str | Path,
    token_column: int = 0,
    tag_column: int = -1,
    encoding_errors: str = "strict",
    scheme: str | None = None,
) -> list[TaggedSentence]:
    """CoNLL columns: one token per line, white-space separated columns, blank lines between
    sentences, ``-DOCSTART-`` lines skipped. Columns count from 0; negative from the end.

    `scheme` ("iob1", "iob2", "bioes") checks that every tag is O or PREFIX-TYPE; None accepts
    any tag (POS, chunks as plain labels). A file without a tag column reads with empty tags.
    """
    path = Path(path)
    if scheme is not None and scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES} or None, got {scheme!r}")

    first_row: list[int] = []  # the line number and column count of the file's first row

    def parse_row(number: int, text: str, sentence: TaggedSentence):
        columns = text.split()
        if columns[0] == DOCSTART:
            return None, None
        if not first_row:
            first_row.extend((number, len(columns)))
        elif len(columns) != first_row[1]:
            conllu = text.count("\t") == 9 or text.startswith("#")
            raise InputFileError(
                f"{path}, line {number}: {len(columns)} columns, but line {first_row[0]} has "
                f"{first_row[1]} columns; every row of a CoNLL file needs the same columns"
                + (" (this looks like CoNLL-U: --format conllu reads it)" if conllu else "")
            )
        if not -len(columns) <= token_column < len(columns):
            raise InputFileError(
                f"{path}, line {number}: {len(columns)} column(s), no token column "
                f"{token_column}; check --token-column"
            )
        tag_index = _tag_index(len(columns), token_column, tag_column)
        tag = None if tag_index is None else columns[tag_index]
        if tag is not None:
            _check_tags(path, number, tag, scheme)
        return columns[token_column], tag

    return _read_tagged(path, encoding_errors, parse_row)


def read_conllu(
    path: str | Path, tag: str = "upos", encoding_errors: str = "strict"
) -> list[TaggedSentence]:
    """CoNLL-U: 10 tab-separated fields per word, `#` comment lines, blank lines between
    sentences. Multiword-token ranges (``1-2``) and empty nodes (``1.1``) are skipped: the
    tokens are the syntactic words. `tag` is "upos" or "xpos"."""
    path = Path(path)
    if tag not in CONLLU_TAGS:
        raise ValueError(f"tag must be one of {tuple(CONLLU_TAGS)}, got {tag!r}")
    field_index = CONLLU_TAGS[tag]

    def parse_row(number: int, text: str, sentence: TaggedSentence):
        if text.startswith("#"):
            return None, None
        fields = text.split("\t")
        if len(fields) != 10:
            raise InputFileError(
                f"{path}, line {number}: {len(fields)} tab-separated field(s), CoNLL-U "
                "has 10 (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)"
            )
        if "-" in fields[0] or "." in fields[0]:
            return None, None
        if not fields[0].isdigit():
            raise InputFileError(f"{path}, line {number}: ID {fields[0]!r} is not a number")
        return fields[1], fields[field_index]

    return _read_tagged(path, encoding_errors, parse_row)


def read_label_text(
    path: str | Path, tokenizer: str = "whitespace", encoding_errors: str = "strict"
) -> list[LabeledText]:
    """One example per line: the label, white space, then the sentence (SST's stsa.fine.*).
    Blank lines are skipped; the sentence is split by `tokenizer`."""
    path = Path(path)
    tokenize = get_tokenizer(tokenizer)
    examples = []
    for number, text in numbered_lines(path, encoding_errors):
        if not text.strip():
            continue
        parts = text.strip().split(maxsplit=1)
        tokens = tokenize(parts[1]) if len(parts) == 2 else []
        if not tokens:
            raise InputFileError(
                f"{path}, line {number}: a label but no sentence; label-text lines are "
                "'LABEL the sentence'"
            )
        examples.append(LabeledText(tokens, parts[0], line=number, row=text))
    return _nonempty(path, examples, "examples")


def read_tsv(
    path: str | Path,
    text_columns: Sequence[str],
    label_column: str,
    tokenizer: str = "whitespace",
    encoding_errors: str = "strict",
) -> list[LabeledText] | list[LabeledPair]:
    """Tab-separated values with a header row naming the columns (SICK). One text column
    gives sentences, two give pairs. A file without the label column reads with empty labels.
    """
    path = Path(path)
    if len(text_columns) not in (1, 2):
        raise ValueError(f"text_columns needs 1 or 2 names, got {list(text_columns)}")
    tokenize = get_tokenizer(tokenizer)
    lines = numbered_lines(path, encoding_errors)
    header = next((text.split("\t") for _, text in lines if text.strip()), None)
    if header is None:
        raise InputFileError(f"{path} is empty; a tsv file starts with a header row")
    missing = [c for c in text_columns if c not in header]
    if missing:
        raise InputFileError(
            f"{path}: no column {', '.join(map(repr, missing))} in the header; it has "
            f"{', '.join(header)}. Check --text-columns"
        )
    label_index = header.index(label_column) if label_column in header else None
    text_indices = [header.index(c) for c in text_columns]
    examples: list = []
    for number, text in lines:
        if not text.strip():
            continue
        fields = text.split("\t")
        if len(fields) != len(header):
            raise InputFileError(
                f"{path}, line {number}: {len(fields)} tab-separated field(s), the header "
                f"has {len(header)}"
            )
        label = fields[label_index] if label_index is not None else ""
        token_lists = [tokenize(fields[i]) for i in text_indices]
        if not all(token_lists):
            raise InputFileError(f"{path}, line {number}: an empty text field")
        if len(token_lists) == 1:
            examples.append(LabeledText(token_lists[0], label, number, text, header))
        else:
            examples.append(LabeledPair(*token_lists, label, number, text, header))
    return _nonempty(path, examples, "examples")


def _replace_column(row: str, index: int | None, value: str, separator: str) -> str:
    columns = row.split(separator) if separator == "\t" else row.split()
    if index is None:
        columns.append(value)
    else:
        columns[index] = value
    return ("\t" if separator == "\t" or "\t" in row else " ").join(columns)


RowWriter = Callable[[str, str], str]  # (a token's source line, its predicted tag) -> line


def _write_tagged(examples: list, predictions: list, write_row: RowWriter) -> list[str]:
    """The source lines of tagged sentences, each token's line given its predicted tag."""
    out: list[str] = []
    for sentence, tags in zip(examples, predictions, strict=True):
        rows = list(sentence.rows)
        for row_index, tag in zip(sentence.token_rows, tags, strict=True):
            rows[row_index] = write_row(rows[row_index], tag)
        out.extend(rows + [""])
    return out


def _write_conll(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    def write_row(row: str, tag: str) -> str:
        index = _tag_index(len(row.split()), options.get("token_column", 0),
                           options.get("tag_column", -1))
        return _replace_column(row, index, tag, " ")

    return _write_tagged(examples, predictions, write_row)


def _write_conllu(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    index = CONLLU_TAGS[options.get("tag", "upos")]
    return _write_tagged(examples, predictions,
                         lambda row, tag: _replace_column(row, index, tag, "\t"))


def _write_label_text(examples: list, predictions: list, options: Mapping[str, Any]
                      ) -> list[str]:
    return [f"{label} {example.row.strip().split(maxsplit=1)[1]}"
            for example, label in zip(examples, predictions, strict=True)]


def _write_tsv(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    header = examples[0].header
    label_column = options["label_column"]
    index = header.index(label_column) if label_column in header else None
    out = ["\t".join(header if index is not None else [*header, label_column])]
    for example, label in zip(examples, predictions, strict=True):
        out.append(_replace_column(example.row, index, label, "\t"))
    return out


def _tsv_problem(options: Mapping[str, Any], task: Any | None) -> str | None:
    """What tsv's options lack for `task` (a TaskType; None: the text of the file alone)."""
    text_columns = options.get("text_columns")
    if task is None:
        return None if text_columns else "--format tsv needs --text-columns"
    wanted = 2 if task.example is LabeledPair else 1
    if not text_columns or len(text_columns) != wanted or not options.get("label_column"):
        return (f"--format tsv for --task {task.name} needs --text-columns with {wanted} "
                "column name(s) and --label-column")
    return None


def _tsv_labels_there(path: str | Path, examples: list, options: Mapping[str, Any]) -> None:
    """A labeled tsv file must have the label column (a file without it reads unlabeled)."""
    header = examples[0].header
    if options["label_column"] not in header:
        raise InputFileError(f"{path}: no column {options['label_column']!r} in the header; "
                             f"it has {', '.join(header)}. Check --label-column")


def _warn_missing_placeholders(path: str | Path, examples: list, labels: Sequence[str]) -> None:
    """label-text lines start with a label: warn when their first words look like text (more
    than one distinct word that is not a label), since that word is not predicted on."""
    unknown = [e.label for e in examples if e.label not in labels]
    if len(set(unknown)) > 1:
        warnings.warn(f"{path}: {len(unknown)} lines start with a word that is not one of the "
                      f"run's labels ({', '.join(labels)}); label-text lines are 'LABEL "
                      "sentence', so each first word was read as the label, not as text. Put "
                      "a placeholder label (such as _) before each sentence", stacklevel=3)


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
}


def read_conll2012_examples(path: str | Path, task: str = "srl", segment_words: int = 512,
                            encoding_errors: str = "strict") -> list:
    """A CoNLL-2012 file (or folder) as `task`'s examples: SRL instances, one per predicate
    (also for `elmo task text`, which has no --task), or coreference segments of at most
    `segment_words` words."""
    return CONLL2012_EXAMPLES[task](path, segment_words, encoding_errors)


FORMATS: dict[str, DatasetFormat] = {f.name: f for f in (
    DatasetFormat("conll", "token per line, white-space columns, blank line between sentences",
                  read_conll, ("token_column", "tag_column", "scheme"), (TaggedSentence,),
                  (".conll",), _write_conll, unlabeled={"scheme": None}),
    DatasetFormat("conllu", "CoNLL-U, 10 tab-separated fields per word", read_conllu,
                  ("tag",), (TaggedSentence,), (".conllu",), _write_conllu),
    DatasetFormat("label-text", "'LABEL sentence' per line", read_label_text, ("tokenizer",),
                  (LabeledText,), (), _write_label_text,
                  check_unlabeled=_warn_missing_placeholders),
    DatasetFormat("tsv", "header row, tab-separated columns", read_tsv,
                  ("text_columns", "label_column", "tokenizer"), (LabeledText, LabeledPair),
                  (".tsv",), _write_tsv, problem=_tsv_problem,
                  check_labeled=_tsv_labels_there),
    DatasetFormat("squad", "SQuAD-layout JSON (v1.1, v2.0, CMRC 2018)", read_squad,
                  ("tokenizer",), (SquadQuestion,), (".json",)),
    DatasetFormat("nli", "SNLI/MultiNLI JSON lines: sentence1, sentence2, gold_label (lines "
                  "labelled - are skipped) or premise, hypothesis, label (a word, or 0/1/2: "
                  f"{'/'.join(NLI_LABELS)})", read_nli, ("tokenizer",), (LabeledPair,), (),
                  write_nli, unlabeled={"skip_unlabeled": False}, notes=nli_notes),
    DatasetFormat("conll2012", "CoNLL-2012 *_gold_conll (OntoNotes): a file or a folder",
                  read_conll2012_examples, ("task", "segment_words"),
                  (SrlInstance, CorefSegment), (".gold_conll",)),
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
