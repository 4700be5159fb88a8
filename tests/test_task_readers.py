"""Task data readers: CoNLL, CoNLL-U, label-text and TSV, with their odd cases."""

from __future__ import annotations

import gzip

import pytest

from elmo.errors import InputFileError
from elmo.tasks.readers import read_dataset, write_predictions

CONLL = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC


Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
"""

CONLLU = """# sent_id = 1
# text = Don't go.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t3:conj\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def write(tmp_path, name, text, gz=False):
    path = tmp_path / (name + (".gz" if gz else ""))
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_conll_sentences_docstart_and_columns(tmp_path, gz):
    path = write(tmp_path, "eng.train", CONLL, gz)
    sentences = read_dataset(path, "conll", scheme="iob1")
    assert [s.tokens for s in sentences] == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    assert sentences[0].tags == ["I-ORG", "O", "I-MISC"]
    assert [s.line for s in sentences] == [3, 8]
    chunks = read_dataset(path, "conll", tag_column=2)
    assert chunks[1].tags == ["I-NP", "I-NP"]
    pos = read_dataset(path, "conll", token_column=0, tag_column=1)
    assert pos[0].tags == ["NNP", "VBZ", "JJ"]


def test_conll_tabs_and_crlf(tmp_path):
    path = write(tmp_path, "a.bio", "中\tB-ORG\r\n国\tI-ORG\r\n\r\n好\tO\r\n")
    sentences = read_dataset(path, "conll", scheme="iob2")
    assert [(s.tokens, s.tags) for s in sentences] == [
        (["中", "国"], ["B-ORG", "I-ORG"]), (["好"], ["O"])]


def test_conll_bad_tag_names_line(tmp_path):
    path = write(tmp_path, "x.conll", "a O\nb S-PER\n")
    assert read_dataset(path, "conll", scheme="bioes")[0].tags == ["O", "S-PER"]
    with pytest.raises(InputFileError, match=r"x.conll, line 2: tag 'S-PER'.*iob2"):
        read_dataset(path, "conll", scheme="iob2")


def test_conll_ragged_columns_name_line(tmp_path):
    path = write(tmp_path, "x.conll", "a NN O\nb\n")
    with pytest.raises(InputFileError, match=r"x.conll, line 2: 1 column"):
        read_dataset(path, "conll")
    with pytest.raises(InputFileError, match=r"line 1: 3 column\(s\), no token column 5"):
        read_dataset(path, "conll", token_column=5)


def test_conll_without_tags_reads_tokens(tmp_path):
    path = write(tmp_path, "raw.conll", "a\nb\n\nc\n")
    sentences = read_dataset(path, "conll")
    assert [(s.tokens, s.tags) for s in sentences] == [(["a", "b"], []), (["c"], [])]


def test_not_utf8_names_file_and_line_unless_replace(tmp_path):
    path = write(tmp_path, "bad.conll", b"a O\n\xff O\n")
    with pytest.raises(InputFileError, match=r"bad.conll, line 2: not valid UTF-8.*replace"):
        read_dataset(path, "conll")
    sentences = read_dataset(path, "conll", encoding_errors="replace")
    assert sentences[0].tokens == ["a", "\ufffd"]


@pytest.mark.parametrize("fmt,options", [
    ("conll", {}), ("conllu", {}), ("label-text", {}),
    ("tsv", {"text_columns": ["a"], "label_column": "y"}),
])
def test_empty_file_is_a_clear_error(tmp_path, fmt, options):
    path = write(tmp_path, "empty.txt", "\n\n")
    with pytest.raises(InputFileError, match="empty.txt (holds no|is empty)"):
        read_dataset(path, fmt, **options)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        read_dataset(tmp_path / "nope", "conll")
    with pytest.raises(ValueError, match="unknown format 'csv'"):
        read_dataset(tmp_path / "nope", "csv")


def test_conllu_skips_comments_ranges_and_empty_nodes(tmp_path):
    path = write(tmp_path, "ud.conllu", CONLLU, gz=True)
    sentences = read_dataset(path, "conllu")
    assert sentences[0].tokens == ["Do", "n't", "go", "."]
    assert sentences[0].tags == ["AUX", "PART", "VERB", "PUNCT"]
    assert read_dataset(path, "conllu", tag="xpos")[0].tags == ["VBP", "RB", "VB", "."]
    assert sentences[1].tokens == ["Hi"] and sentences[1].line == 10


def test_conllu_malformed_line(tmp_path):
    path = write(tmp_path, "ud.conllu", "1 Do do AUX VBP _ 3 aux _ _\n")
    with pytest.raises(InputFileError, match=r"ud.conllu, line 1: 1 tab-separated field"):
        read_dataset(path, "conllu")


def test_label_text(tmp_path):
    path = write(tmp_path, "stsa.fine.dev", "2 in his first stab .\n\n0 bad , bad film\n")
    examples = read_dataset(path, "label-text")
    assert [(e.label, e.tokens, e.line) for e in examples] == [
        ("2", ["in", "his", "first", "stab", "."], 1), ("0", ["bad", ",", "bad", "film"], 3)]
    chars = read_dataset(write(tmp_path, "zh", "pos 很好\n"), "label-text", tokenizer="chars")
    assert chars[0].tokens == ["很", "好"]
    with pytest.raises(InputFileError, match=r"stsa.bad, line 2: a label but no sentence"):
        read_dataset(write(tmp_path, "stsa.bad", "1 ok\n3\n"), "label-text")


SICK = ("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        "1\tA kid plays\tA child is playing\t4.5\tENTAILMENT\n"
        "2\tNobody runs\tA man runs\t3.2\tCONTRADICTION\n")


def test_tsv_pairs_and_single_column(tmp_path):
    path = write(tmp_path, "SICK_train.txt", SICK)
    pairs = read_dataset(path, "tsv", text_columns=["sentence_A", "sentence_B"],
                         label_column="entailment_judgment")
    assert pairs[0].tokens_a == ["A", "kid", "plays"]
    assert pairs[1].tokens_b == ["A", "man", "runs"] and pairs[1].label == "CONTRADICTION"
    single = read_dataset(path, "tsv", text_columns=["sentence_B"], label_column="pair_ID")
    assert [(e.tokens[-1], e.label) for e in single] == [("playing", "1"), ("runs", "2")]


def test_tsv_errors_name_columns_and_lines(tmp_path):
    path = write(tmp_path, "s.tsv", SICK + "3\tonly two\n")
    with pytest.raises(InputFileError, match="no column 'A' in the header; it has pair_ID"):
        read_dataset(path, "tsv", text_columns=["A"], label_column="entailment_judgment")
    with pytest.raises(InputFileError, match=r"s.tsv, line 4: 2 tab-separated field\(s\)"):
        read_dataset(path, "tsv", text_columns=["sentence_A"], label_column="pair_ID")


def test_predictions_round_trip_in_each_format(tmp_path):
    cases = [
        ("conll", CONLL, {"scheme": "iob1"}),
        ("conllu", CONLLU, {"tag": "xpos"}),
        ("label-text", "2 in his first stab .\n0 bad film\n", {}),
        ("tsv", SICK, {"text_columns": ["sentence_A", "sentence_B"],
                       "label_column": "entailment_judgment"}),
    ]
    for fmt, text, options in cases:
        examples = read_dataset(write(tmp_path, "in", text), fmt, **options)
        if fmt in ("conll", "conllu"):
            predictions = [[f"B-X{i}" for i, _ in enumerate(e.tokens)] for e in examples]
        else:
            predictions = [f"L{i}" for i, _ in enumerate(examples)]
        out = tmp_path / f"out.{fmt}"
        write_predictions(out, fmt, examples, predictions, **options)
        again = read_dataset(out, fmt, **{k: v for k, v in options.items() if k != "scheme"})
        assert [getattr(e, "tokens", None) for e in again] == \
            [getattr(e, "tokens", None) for e in examples]
        got = [e.tags if fmt in ("conll", "conllu") else e.label for e in again]
        assert got == predictions, fmt
    # conllu keeps comments, multiword ranges and empty nodes
    assert "# text = Don't go." in (tmp_path / "out.conllu").read_text()
    assert "1-2\tDon't" in (tmp_path / "out.conllu").read_text()


def test_predictions_added_where_input_has_no_tags(tmp_path):
    examples = read_dataset(write(tmp_path, "raw", "a\nb\n"), "conll")
    write_predictions(tmp_path / "o", "conll", examples, [["B-X", "O"]])
    assert (tmp_path / "o").read_text() == "a B-X\nb O\n\n"
    tsv = read_dataset(write(tmp_path, "t", "s\nhello there\n"), "tsv", text_columns=["s"],
                       label_column="y")
    write_predictions(tmp_path / "o2", "tsv", tsv, ["pos"], label_column="y")
    assert (tmp_path / "o2").read_text() == "s\ty\nhello there\tpos\n"


@pytest.mark.parametrize("parts,fmt,options,count", [
    (("conll2003", "eng.testa"), "conll", {"scheme": "iob1"}, 3250),
    (("ud-english-ewt", "en_ewt-ud-dev.conllu"), "conllu", {}, 2001),
    (("sst5", "stsa.fine.dev"), "label-text", {}, 1101),
    (("sick", "SICK_trial.txt"), "tsv",
     {"text_columns": ["sentence_A", "sentence_B"], "label_column": "entailment_judgment"}, 500),
    (("msra-ner", "msra_test_bio"), "conll", {"scheme": "iob2"}, 3442),
])
def test_shared_data_sets_read_with_their_documented_counts(parts, fmt, options, count):
    from tests.conftest import require_shared

    examples = read_dataset(require_shared("data", *parts), fmt, **options)
    assert len(examples) == count
