"""The label-text and TSV family of `elmo task` data: a labelled sentence per line (SST's
'LABEL sentence') or tab-separated columns under a header (SICK), read into labelled sentences
or pairs and written back with predicted labels."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elmo.errors import InputFileError
from elmo.tasks.examples import LabeledPair, LabeledText
from elmo.tasks.reader_lines import nonempty, numbered_lines, replace_column
from elmo.tokenize import get_tokenizer


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
    return nonempty(path, examples, "examples")


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
    return nonempty(path, examples, "examples")

def write_label_text(examples: list, predictions: list, options: Mapping[str, Any]
                      ) -> list[str]:
    return [f"{label} {example.row.strip().split(maxsplit=1)[1]}"
            for example, label in zip(examples, predictions, strict=True)]


def write_tsv(examples: list, predictions: list, options: Mapping[str, Any]) -> list[str]:
    header = examples[0].header
    label_column = options["label_column"]
    index = header.index(label_column) if label_column in header else None
    out = ["\t".join(header if index is not None else [*header, label_column])]
    for example, label in zip(examples, predictions, strict=True):
        out.append(replace_column(example.row, index, label, "\t"))
    return out


def tsv_problem(options: Mapping[str, Any], task: Any | None) -> str | None:
    """What tsv's options lack for `task` (a TaskType; None: the text of the file alone)."""
    text_columns = options.get("text_columns")
    if task is None:
        return None if text_columns else "--format tsv needs --text-columns"
    wanted = 2 if task.example is LabeledPair else 1
    if not text_columns or len(text_columns) != wanted or not options.get("label_column"):
        return (f"--format tsv for --task {task.name} needs --text-columns with {wanted} "
                "column name(s) and --label-column")
    return None


def tsv_labels_there(path: str | Path, examples: list, options: Mapping[str, Any]) -> None:
    """A labeled tsv file must have the label column (a file without it reads unlabeled)."""
    header = examples[0].header
    if options["label_column"] not in header:
        raise InputFileError(f"{path}: no column {options['label_column']!r} in the header; "
                             f"it has {', '.join(header)}. Check --label-column")


def warn_missing_placeholders(path: str | Path, examples: list, labels: Sequence[str]) -> None:
    """label-text lines start with a label: warn when their first words look like text (more
    than one distinct word that is not a label), since that word is not predicted on."""
    unknown = [e.label for e in examples if e.label not in labels]
    if len(set(unknown)) > 1:
        warnings.warn(f"{path}: {len(unknown)} lines start with a word that is not one of the "
                      f"run's labels ({', '.join(labels)}); label-text lines are 'LABEL "
                      "sentence', so each first word was read as the label, not as text. Put "
                      "a placeholder label (such as _) before each sentence", stacklevel=3)
