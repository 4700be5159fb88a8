"""The CoNLL-2012 reader: documents, sentences, spans, clusters; .xz; folders; bad input;
OntoNotes NER (`--task tagging --format conll2012`) read and written as BIO tags."""

from __future__ import annotations

import gzip
import json
import lzma

import pytest

from elmo.cli import main
from elmo.errors import InputFileError
from elmo.io.textfile import read_lines
from elmo.tasks.conll2012 import read_conll2012
from elmo.tasks.ner_data import entity_cells, read_ner, write_ner
from elmo.tasks.readers import read_dataset
from tests.conftest import require_shared
from tests.helpers.conll2012 import DOC, TEXT, document, sentence, write_conll2012


@pytest.mark.parametrize("name", ["x_gold_conll", "x_gold_conll.xz"])
def test_documents_sentences_and_columns(tmp_path, name):
    docs = read_conll2012(write_conll2012(tmp_path / name))
    assert [(d.name, d.part, d.genre, d.line) for d in docs] == [
        (DOC, 0, "bc", 1), ("nw/wsj/00/wsj_0001", 0, "nw", 12)]
    first, second = docs[0].sentences
    assert first.words == ["John", "saw", "Mary", "."]
    assert first.pos == ["NNP", "VBD", "NNP", "."]
    assert first.speakers == ["Speaker#1"] * 4 and second.speakers == ["Speaker#2"] * 3
    assert first.entities == [("PERSON", 0, 0), ("PERSON", 2, 2)]
    assert (first.line, second.line) == (2, 7)
    assert first.rows == TEXT.splitlines()[1:5]
    assert first.document == DOC
    [prop] = first.propositions
    assert prop.predicate == 1
    assert prop.arguments == [("ARG0", 0, 0), ("V", 1, 1), ("ARG1", 2, 2)]
    assert docs[0].words == ["John", "saw", "Mary", ".", "He", "left", "."]
    assert docs[0].sentence_starts == [0, 4]


def test_spans_across_rows_nested_mentions_and_sentences_without_predicates(tmp_path):
    docs = read_conll2012(write_conll2012(tmp_path / "x_gold_conll"))
    third, fourth = docs[1].sentences
    assert third.propositions[0].arguments == [
        ("ARG0", 0, 2), ("V", 3, 3), ("ARGM-MNR", 4, 4)]
    assert sorted(third.mentions) == [(3, 0, 2), (4, 1, 2)]
    assert fourth.propositions == [] and fourth.predicates == []


def test_clusters_per_document(tmp_path):
    doc = read_conll2012(write_conll2012(tmp_path / "x_gold_conll"))[0]
    assert doc.clusters() == {1: [(0, 0, 0), (1, 0, 0)], 2: [(0, 2, 2)]}
    assert doc.token_clusters() == [[(0, 0), (4, 4)], [(2, 2)]]


def test_a_folder_of_files_in_path_order(tmp_path):
    (tmp_path / "b").mkdir()
    write_conll2012(tmp_path / "b" / "one.gold_conll", document("nw/b", [sentence("nw/b", [
        ("x", "NN", "-", "*", [], "-")])]))
    write_conll2012(tmp_path / "a_gold_conll.xz", document("nw/a", [sentence("nw/a", [
        ("y", "NN", "-", "*", [], "-")])]))
    (tmp_path / "README.md").write_text("not read\n")
    assert [d.name for d in read_conll2012(tmp_path)] == ["nw/a", "nw/b"]


def test_xz_goes_through_the_one_text_reader(tmp_path):
    plain = tmp_path / "a.txt.xz"
    plain.write_bytes(lzma.compress(b"one\ntwo\n"))
    gz = tmp_path / "a.txt.gz"
    gz.write_bytes(gzip.compress(b"one\ntwo\n"))
    assert list(read_lines(plain)) == list(read_lines(gz)) == [(0, "one"), (1, "two")]
    broken = tmp_path / "b.txt.xz"
    broken.write_bytes(lzma.compress(("word\n" * 5000).encode())[:40])
    with pytest.raises(InputFileError, match="b.txt.xz is not a complete compressed file"):
        list(read_lines(broken))


BAD = [
    (TEXT.replace("#end document\n", "", 1), "line 11: '#begin document' while the document "
     "of line 1 has no '#end document'"),
    (TEXT.rsplit("#end document", 1)[0], "the document of line 12 .* has no '#end document' "
     "before the end of the file"),
    (TEXT.replace("(ARG1*)", "(ARG1*)  *", 1), "line 4: 14 columns, but line 2 of the same "
     "sentence has 13"),
    (TEXT.replace("(ARG1*)", "(ARG1*", 1), r"line 4: span \(ARG1 is never closed"),
    (TEXT.replace("(ARG1*)", "*)", 1), "line 4: '\\*\\)' closes a span that was never opened"),
    (TEXT.replace("(2)", "(2", 1), r"line 4: coreference mention \(2 is never closed"),
    (TEXT.replace("(2)", "2)", 1), "line 4: coreference '2\\)' closes a mention never opened"),
    (TEXT.replace("(2)", "(x)", 1), "line 4: coreference '\\(x\\)'"),
    (TEXT.replace("(ARG1*)", "ARG1", 1), "line 4: 'ARG1' is not a bracketed cell"),
    ("x 0 0 w NN * - - - A * -\n", "line 1: a row outside a document"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_input_names_file_line_and_problem(tmp_path, text, message):
    path = write_conll2012(tmp_path / "bad_gold_conll", text)
    with pytest.raises(InputFileError, match=f"bad_gold_conll, {message}|bad_gold_conll: "
                       f"{message}"):
        read_conll2012(path)


def test_no_document_and_empty_folder(tmp_path):
    with pytest.raises(InputFileError, match="no '#begin document' part"):
        read_conll2012(write_conll2012(tmp_path / "e_gold_conll", "\n"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match="a folder without \\*_conll files"):
        read_conll2012(tmp_path / "empty")


def test_shared_development_set_counts():
    path = require_shared("data", "ontonotes-conll2012", "development.english.v4_gold_conll.xz")
    docs = read_conll2012(path)
    sentences = [s for d in docs for s in d.sentences]
    # the data's README: 1,491 parts, 15,680 sentences, 35,297 propositions
    assert (len(docs), len(sentences), sum(len(s.predicates) for s in sentences)) == (
        1491, 15680, 35297)


def test_ner_column_read_as_bio_tags(tmp_path):
    sentences = read_dataset(write_conll2012(tmp_path / "x_gold_conll"), "conll2012",
                             task="tagging")
    assert [s.tokens for s in sentences] == [["John", "saw", "Mary", "."], ["He", "left", "."],
                                             ["The", "big", "dog", "barked", "loudly", "."],
                                             ["Nothing", "here"]]
    assert sentences[0].tags == ["B-PERSON", "O", "B-PERSON", "O"]
    assert sentences[1].tags == ["O"] * 3


def test_entity_cells_of_bio_tags():
    assert entity_cells(["B-ORG", "I-ORG", "O", "B-GPE", "I-PERSON", "B-GPE", "I-GPE"]) == \
        ["(ORG*", "*)", "*", "(GPE)", "(PERSON)", "(GPE*", "*)"]


def test_ontonotes_ner_trained_predicted_and_scored(tmp_path, capsys):
    data = write_conll2012(tmp_path / "train.gold_conll")
    assert main(["task", "train", "--task", "tagging", "--format", "conll2012", "--scheme",
                 "iob2", "--train", str(data), "--dev", str(data), "--elmo", "none", "--out",
                 str(tmp_path / "run"), "--epochs", "1", "--hidden-dim", "8",
                 "--embedding-dim", "8", "--quiet"]) == 0
    out = tmp_path / "predicted.gold_conll"
    assert main(["task", "predict", str(tmp_path / "run"), str(data), str(out), "--quiet"]) == 0
    before, after = read_conll2012(data), read_conll2012(out)  # a CoNLL-2012 file again
    assert [(d.name, d.part, d.words) for d in after] == \
        [(d.name, d.part, d.words) for d in before]
    assert [len(s.tags) for s in read_ner(out)] == [len(s.tokens) for s in read_ner(data)]
    capsys.readouterr()
    assert main(["task", "evaluate", str(tmp_path / "run"), "--test", str(out), "--json",
                 "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "span-f1" and result["n"] == 4 and 0 <= result["score"] <= 100


def test_predicted_entities_written_into_the_ner_column(tmp_path):
    sentences = read_ner(write_conll2012(tmp_path / "x_gold_conll"))
    predicted = [["B-ORG", "I-ORG", "O", "O"], ["B-GPE", "O", "O"],
                 ["O", "B-ANIMAL", "I-ANIMAL", "O", "O", "B-X"], ["O", "O"]]
    out = tmp_path / "predicted_gold_conll"
    out.write_text("\n".join(write_ner(sentences, predicted, {})) + "\n", encoding="utf-8")
    assert [s.tags for s in read_ner(out)] == predicted
    again = read_conll2012(out)  # everything but the NER column as it was
    assert [[(s.words, s.propositions, s.mentions) for s in d.sentences] for d in again] == \
        [[(s.words, s.propositions, s.mentions) for s in d.sentences]
         for d in read_conll2012(tmp_path / "x_gold_conll")]
