"""Documents that repeat a test set's text left out of a training corpus (`elmo prepare-corpus
--exclude-overlap`, elmo.io.overlap, elmo.tasks.test_text): a run of 25 Chinese characters or 13
words shared with a test file, whatever its format (SIGHAN's segmented lines, CoNLL 'char tag'
lines, SQuAD JSON), leaves a document out; a clean one is kept; both are counted."""

from __future__ import annotations

import builtins
import io
import json
import sys

import pytest

from elmo.cli import build_parser, main
from elmo.data.corpus import Selection, Tally, iter_lines
from elmo.data.prepared import MANIFEST_NAME, PreparedCorpus
from elmo.errors import InputFileError
from elmo.io.overlap import UNITS
from elmo.tasks.test_text import TEST_TEXTS, TestTextKind, read_test_texts, text_kind_of
from tests.conftest import REPO
from tests.helpers.scripts import script_module

# A test sentence of 30 characters, and news that quotes it whole, a part of it, or none.
TEST = "国务院总理李鹏今天在人民大会堂会见了来访的泰国外交部长素林先生。"
QUOTED = "新华社消息：国务院总理李鹏今天在人民大会堂会见了来访的泰国外交部长素林先生。双方交谈。"
SHORT = "国务院总理李鹏今天在人民大会堂会见客人。"  # 19 characters of TEST: too short a run
CLEAN = "今年秋粮收购进展顺利，各地粮库满仓。农民增收明显。"


def sighan(text: str) -> str:
    """`text` segmented as SIGHAN's gold files are: words between two spaces."""
    return "  ".join(text[i:i + 2] for i in range(0, len(text), 2)) + "  \n"


def conll(text: str) -> str:
    """`text` as MSRA NER's test file: a 'char tag' line per character, a blank line after."""
    return "".join(f"{c}\tO\n" for c in text) + "\n"


def squad(context: str, question: str) -> str:
    return json.dumps({"version": "v1.0", "data": [{"title": "t", "paragraphs": [{
        "context": context, "qas": [{"id": "q1", "question": question, "answers": [
            {"text": context[:2], "answer_start": 0}]}]}]}]}, ensure_ascii=False)


def news(tmp_path, *docs: str):
    """A JSON file of an API's answer: a list of items, each with an object holding the text
    as HTML paragraphs (the shape of a news site's export)."""
    items = [{"num": i, "detail": {"id": f"v{i}", "title": f"第{i}条",
                                   "content": "".join(f"<p>{p}</p>" for p in doc.split("|"))}}
             for i, doc in enumerate(docs)]
    path = tmp_path / "day.json"
    path.write_text(json.dumps({"total": len(items), "videoList": items}, ensure_ascii=False),
                    encoding="utf-8")
    return path


def kept(paths, overlap) -> tuple[list[str], Tally]:
    tally = Tally()
    lines = list(iter_lines(paths, language="zh", selection=Selection(overlap=overlap),
                            tally=tally))
    return lines, tally


@pytest.mark.parametrize("fmt", ["sighan", "conll", "squad-context", "squad-question"])
def test_a_document_quoting_a_test_file_is_left_out_and_a_clean_one_kept(tmp_path, fmt):
    name, text = {"sighan": ("pku_test_gold.utf8", sighan(TEST)),
                  "conll": ("msra_test_bio", conll(CLEAN[:4]) + conll(TEST)),
                  "squad-context": ("cmrc.json", squad(TEST, "谁会见了谁？")),
                  "squad-question": ("cmrc.json", squad("这段文章讲的是别的事情。", TEST))}[fmt]
    test = tmp_path / name
    test.write_text(text, encoding="utf-8")
    assert text_kind_of(test).name == fmt.split("-")[0].replace("sighan", "text")
    overlap = read_test_texts([test], characters=True)
    assert overlap.unit.n == 25 and overlap.size > 0
    corpus = news(tmp_path, QUOTED, CLEAN, SHORT)
    lines, tally = kept([corpus], overlap)
    assert lines == ["今年秋粮收购进展顺利，各地粮库满仓。", "农民增收明显。",
                     "国务院总理李鹏今天在人民大会堂会见客人。"]
    assert tally.overlapped == {str(test): 1} and tally.overlapped_inputs == {str(corpus): 1}
    # without the check, nothing is left out
    assert len(kept([corpus], None)[0]) == 5


def test_a_run_across_paragraphs_of_a_document_counts_and_full_width_is_ascii(tmp_path):
    test = tmp_path / "gold.utf8"
    test.write_text(sighan("１９９８年" + TEST), encoding="utf-8")
    overlap = read_test_texts([test], characters=True)
    # 25 characters in two paragraphs, 21 of them without the digits
    corpus = news(tmp_path, "1998年国务院总理李鹏今天在人民大会堂|会见了来访", CLEAN)
    lines, tally = kept([corpus], overlap)
    assert lines == ["今年秋粮收购进展顺利，各地粮库满仓。", "农民增收明显。"]
    assert sum(tally.overlapped.values()) == 1


def test_words_are_the_unit_for_other_tokenizers(tmp_path):
    sentence = "The committee approved the new budget for the coming year after a long debate ."
    test = tmp_path / "test.txt"
    test.write_text(sentence + "\n", encoding="utf-8")
    overlap = read_test_texts([test], characters=False)
    assert overlap.unit is UNITS["words"] and overlap.unit.n == 13
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Yesterday the COMMITTEE approved the new budget for the coming year after "
                      "a long debate, they said.\nThe committee approved the new budget today.\n",
                      encoding="utf-8")
    tally = Tally()
    assert list(iter_lines([corpus], selection=Selection(overlap=overlap), tally=tally)) == [
        "The committee approved the new budget today."]
    assert tally.overlapped == {str(test): 1}


def test_prepare_corpus_counts_them_in_the_summary_and_manifest(tmp_path, capsys):
    (tmp_path / "laws").mkdir()
    law = tmp_path / "laws" / "law.md"
    law.write_text(f"---\ndraft: true\n---\n# 某法\n\n<!-- INFO END -->\n## 第一章\n\n"
                   f"第一条 {TEST}\n", encoding="utf-8")
    (tmp_path / "laws" / "other.md").write_text(f"# 他法\n\n- {CLEAN}\n", encoding="utf-8")
    corpus = news(tmp_path, QUOTED, CLEAN)
    gold, bio = tmp_path / "pku_test_gold.utf8", tmp_path / "msra_test_bio"
    gold.write_text(sighan(TEST), encoding="utf-8")
    bio.write_text(conll(CLEAN[:20]), encoding="utf-8")
    out = tmp_path / "prepared"
    assert main(["prepare-corpus", "--train", str(corpus), str(tmp_path / "laws" / "*.md"),
                 "--out", str(out), "--tokenizer", "chars", "--exclude-overlap", str(gold),
                 str(bio)]) == 0
    err = capsys.readouterr().err
    assert ("2 documents left out for sharing 25 characters with a test file "
            "(pku_test_gold.utf8 2, msra_test_bio 0;") in err
    manifest = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))["overlap"]
    assert manifest["left_out"] == {str(gold): 2}
    assert manifest["inputs"] == {str(corpus): 1, str(law): 1}
    assert manifest["sources"] == [str(gold), str(bio)] and manifest["n"] == 25
    sentences = ["".join(s) for s in PreparedCorpus(out).sentences()]
    assert sentences == ["今年秋粮收购进展顺利，各地粮库满仓。", "农民增收明显。"] * 2
    assert "李" not in PreparedCorpus(out).vocab  # nor in the vocabulary


def test_a_missing_or_unreadable_test_file_is_named(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CLEAN + "\n", encoding="utf-8")
    missing = tmp_path / "nowhere.utf8"
    args = ["prepare-corpus", "--train", str(corpus), "--out", str(tmp_path / "out"),
            "--tokenizer", "chars", "--exclude-overlap"]
    assert main([*args, str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"the test file {missing} does not exist" in err and len(err.splitlines()) == 1
    bad = tmp_path / "test.json"  # JSON, but not SQuAD's layout
    bad.write_text('{"rows": []}', encoding="utf-8")
    with pytest.raises(InputFileError, match=str(bad)):
        read_test_texts([bad], characters=True)
    assert main([*args, str(bad)]) == 1
    assert str(bad) in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputFileError, match="the test file .*empty.txt has no text"):
        read_test_texts([empty], characters=True)
    assert not (tmp_path / "out").exists()


def test_a_test_file_is_read_once_and_known_by_its_text(tmp_path, monkeypatch):
    """Its first line (to tell its kind), then its texts: not again for the sha256, which is
    of the texts, so the same text with other line endings is the same test set."""
    unix, windows, other = tmp_path / "unix.utf8", tmp_path / "windows.utf8", tmp_path / "o.utf8"
    unix.write_bytes(sighan(TEST).encode())
    windows.write_bytes(sighan(TEST).replace("\n", "\r\n").encode())
    other.write_bytes(sighan(CLEAN).encode())
    opened, real_open = [], io.open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)  # pathlib's
    monkeypatch.setattr(builtins, "open", counting_open)  # elmo.io.textfile's
    first = read_test_texts([unix], characters=True)
    assert opened.count(str(unix)) == 2
    assert first.sha256 == read_test_texts([windows], characters=True).sha256
    assert first.sha256 != read_test_texts([other], characters=True).sha256
    assert first.ngrams == read_test_texts([windows], characters=True).ngrams


def test_a_document_too_long_to_compare_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr("elmo.io.inputs.MAX_DOCUMENT_CHARS", 30)
    test = tmp_path / "gold.utf8"
    test.write_text(sighan(TEST), encoding="utf-8")
    law = tmp_path / "law.md"
    law.write_text(f"# 法\n\n{CLEAN}\n{CLEAN}\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=f"{law}, line 3: a document is longer than 30 "
                       "characters, too long to compare with the test files; split the file "
                       "into documents"):
        kept([law], read_test_texts([test], characters=True))


def test_a_new_test_file_format_is_one_record(tmp_path, monkeypatch, capsys):
    """A toy record (TSV, the text in its first column) placed before text, which takes every
    file: read by the check, named in --help."""
    toy = TestTextKind("toy-tsv", "text TAB label lines: the text",
                       lambda path, first: path.suffix == ".tsv",
                       lambda path: (line.split("\t")[0] for line in
                                     path.read_text(encoding="utf-8").splitlines()))
    text = TEST_TEXTS["text"]
    monkeypatch.delitem(TEST_TEXTS, "text")
    monkeypatch.setitem(TEST_TEXTS, toy.name, toy)
    monkeypatch.setitem(TEST_TEXTS, text.name, text)
    test = tmp_path / "test.tsv"
    test.write_text(f"{TEST}\tpositive\n", encoding="utf-8")
    assert text_kind_of(test) is toy
    lines, tally = kept([news(tmp_path, QUOTED, CLEAN)], read_test_texts([test], True))
    assert len(lines) == 2 and tally.overlapped == {str(test): 1}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["prepare-corpus", "--help"])
    assert "toy-tsv: text TAB label lines" in " ".join(capsys.readouterr().out.split())


def test_the_run_length_benchmark_counts_what_exclude_overlap_leaves_out(tmp_path, monkeypatch,
                                                                         capsys):
    """benchmarks/overlap_length.py on a tiny corpus and test set: the test files read as
    --exclude-overlap reads them; the DLC/ folder's laws not read."""
    bench = script_module(REPO / "benchmarks" / "overlap_length.py", monkeypatch)
    data = tmp_path / "data"
    data.mkdir()
    (data / "gold.utf8").write_text(sighan(TEST), encoding="utf-8")
    (data / "trial.json").write_text(squad("这段文章讲的是别的事情。", "谁会见了谁？"),
                                     encoding="utf-8")
    (tmp_path / "xwlb" / "assets" / "2012").mkdir(parents=True)
    news(tmp_path / "xwlb" / "assets" / "2012", QUOTED, CLEAN)
    for folder, text in (("宪法", CLEAN), ("行政法", QUOTED), ("DLC/地方", QUOTED)):
        (tmp_path / "Laws" / folder).mkdir(parents=True)
        (tmp_path / "Laws" / folder / "法.md").write_text(f"# 法\n\n{text}\n", encoding="utf-8")
    monkeypatch.setattr(bench, "DATA", data)
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(bench, "TEST_FILES", ("gold.utf8", "trial.json"))
    monkeypatch.setattr(sys, "argv", [
        "overlap_length.py", "--xwlb", str(tmp_path / "xwlb"), "--laws", str(tmp_path / "Laws"),
        "--years", "2012", "--lengths", "25", "33"])
    bench.main()
    result = json.loads((tmp_path / "results" / "training" / "zh-overlap-length.json")
                        .read_text(encoding="utf-8"))
    # TEST is 32 characters, quoted whole: it shares a run of 25, none of 33
    assert result["rows"] == [["25 characters", 1, 1], ["33 characters", 0, 0]]
    assert "(2 items)" in result["title"] and "(2 laws)" in result["title"]
    assert "1 news items,     1 laws left out" in capsys.readouterr().out
