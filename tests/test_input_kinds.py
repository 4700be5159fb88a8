"""The input kinds of a corpus (elmo.io.inputs): text, FASTA, JSON lines and WikiExtractor's
output, recognised by name or first line, read streamed, their paragraphs split into
sentences (elmo.io.sentences); a WikiExtractor folder and a JSON lines file train (and
resume) as their text does; malformed lines and documents are named and skipped."""

from __future__ import annotations

import bz2
import gzip
import json
import random
import tracemalloc
import warnings

import pytest

from elmo.cli import main
from elmo.data.corpus import (
    count_tokens,
    expand_paths,
    iter_lines,
    iter_sentences,
    split_language,
)
from elmo.errors import InputFileError
from elmo.io.inputs import INPUT_KINDS, MAX_NAMED, input_kind
from elmo.io.sentences import SPLITTERS
from elmo.tokenize import TOKENIZERS
from tests.helpers.training import (
    assert_identical,
    run,
    run_files,
    tiny_config,
    write_corpus,
    write_documents,
)


def sentences_of(path, **options) -> list[str]:
    return list(iter_lines(expand_paths([path]), **options))


def test_a_wikiextractor_folder_and_json_lines_read_as_their_sentences(tmp_path):
    corpus = write_documents(tmp_path)
    want = corpus["text"].read_text(encoding="utf-8").splitlines()
    files = expand_paths([corpus["wikiextractor"]])
    assert [f.relative_to(corpus["wikiextractor"]).as_posix() for f in files] == [
        "AA/wiki_00", "AA/wiki_01", "AB/wiki_00"]  # WikiExtractor's order
    assert {input_kind(f).name for f in files} == {"wikiextractor"}
    assert input_kind(corpus["jsonl"]).name == "jsonl"
    assert input_kind(corpus["text"]).name == "text"
    assert sentences_of(corpus["wikiextractor"]) == want  # the title lines left out
    assert sentences_of(corpus["jsonl"]) == want
    # named as the kind, whatever the file is called
    assert sentences_of(corpus["jsonl"], input_format="jsonl") == want
    # read as text, a WikiExtractor file is its lines, markup included
    as_text = sentences_of(files[0], input_format="text")
    assert as_text[0].startswith("<doc id=") and "</doc>" in as_text


def test_input_kinds_are_recognised_by_name_or_first_line(tmp_path):
    docs = [{"id": str(i), "text": f"Sentence {i} here. And another one."} for i in range(3)]
    body = "\n" + "".join(json.dumps(d) + "\n" for d in docs)  # a blank line first
    cases = {
        "plain.txt": ("text", "a line\n{not json\n"),
        "braces.txt": ("text", '{"title": "no text field"}\n'),
        "dump.txt": ("jsonl", body),  # an object with a "text" string: JSON lines
        "wudao.txt": ("jsonl", '{"title": "T", "content": "正文。"}\n'),  # or "content"
        "named.jsonl": ("jsonl", "{bad\n" + body),  # by name, even if its first line is bad
        "named.ndjson.gz": ("jsonl", body),
        "wiki_07": ("wikiextractor", '\n<doc id="1" url="?curid=1" title="T">\nT\n</doc>\n'),
        "seqs.fa": ("fasta", ">p1\nMKV\n"),
        "law.md": ("markdown", "# Title\n\nText.\n"),
        "notes.markdown.gz": ("markdown", "Text.\n"),
        "day.json": ("json", '{"total": 1, "list": [{"content": "<p>Text.</p>"}]}'),
        "pretty.json": ("json", '{\n "text": "Text."\n}\n'),
        "lines.json": ("jsonl", body),  # JSON lines, whatever the name says
    }
    for name, (kind, text) in cases.items():
        path = tmp_path / name
        if name.endswith(".gz"):
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text, encoding="utf-8")
        assert input_kind(path).name == kind, name
    assert set(INPUT_KINDS) == {"text", "fasta", "jsonl", "json", "markdown", "wikiextractor"}
    with pytest.raises(InputFileError, match="unknown input format 'xml'"):
        input_kind(tmp_path / "plain.txt", "xml")


def test_markdown_is_its_prose_a_document_per_file_titled_by_its_first_heading(tmp_path):
    path = tmp_path / "law.md"
    path.write_text("---\ndraft: true\ntitle: not this\n---\n\n# 某法 <!-- 标题 -->\n\n"
                    "# 副标题\n\n2021年1月1日 施行\n\n<!-- INFO END -->\n<!-- a comment\nover "
                    "lines -->\n## 第一章 总则\n\n第一条 为了**保护**权益。第二条 见[附件](a.md)。"
                    "\n\n- 一项\n2. 二项\n> 引用\n\n```\ncode = 1\n```\n***\n| 甲 | 乙 |\n"
                    "|---|:-:|\n| 1 | 2 |\n![图](p.png)\n收入<b>不</b>减少 a < b\n",
                    encoding="utf-8")
    passages = list(INPUT_KINDS["markdown"].read(path))
    assert [p.text for p in passages] == [
        "2021年1月1日 施行", "第一条 为了保护权益。第二条 见附件。", "一项", "二项", "引用",
        "甲 乙", "1 2", "收入不减少 a < b"]
    assert {(p.key, p.title) for p in passages} == {("law.md", "某法")}
    assert passages[0].line == 10
    assert sentences_of(path, language="zh")[1:3] == ["第一条 为了保护权益。", "第二条 见附件。"]


def test_a_json_file_is_its_objects_with_text_their_html_paragraphs(tmp_path):
    day = {"total": 2, "serverTime": 1, "videoList": [
        {"num": 1, "video_title": "no text here", "video_detail": {
            "id": "V1", "title": "[视频]甲", "content": "<p>  第一段。第二句！</p>\r\n<p>(编辑：某)"
            "</P><br/>第三段&amp;尾</p>", "brief": "不读"}},
        {"num": 2, "video_detail": {"title": "乙", "text": "一行\n两行", "content": "不读"}},
        {"num": 3, "video_detail": {"content": 7}}]}
    path = tmp_path / "20120702.json"
    path.write_text(json.dumps(day, ensure_ascii=False), encoding="utf-8")
    passages = list(INPUT_KINDS["json"].read(path))
    assert [(p.text, p.title) for p in passages] == [
        ("第一段。第二句！", "[视频]甲"), ("(编辑：某)", "[视频]甲"), ("第三段&尾", "[视频]甲"),
        ("一行", "乙"), ("两行", "乙")]
    assert len({p.key for p in passages}) == 2  # two documents
    assert sentences_of(path, language="zh")[:2] == ["第一段。", "第二句！"]
    broken = tmp_path / "broken.json"
    broken.write_text('{\n "content": "a",\n}\n', encoding="utf-8")
    with pytest.warns(UserWarning, match=f"{broken}, line 3: not JSON"):
        assert sentences_of(broken) == []


def test_a_json_file_too_long_to_read_whole_is_named_and_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr("elmo.io.inputs.MAX_DOCUMENT_CHARS", 20)
    path = tmp_path / "big.json"
    path.write_text('[{"text": "one"},\n {"text": "two three four five"}]\n', encoding="utf-8")
    with pytest.warns(UserWarning, match="big.json, line 1: the file is longer than 20 "
                      "characters, too long to read whole; write it as JSON lines \\(.jsonl\\); "
                      "skipped"):
        assert sentences_of(path) == []


def test_a_wikiextractor_document_too_long_to_hold_is_named_and_skipped(tmp_path, monkeypatch):
    """Held until its </doc> (to drop the title line), a document past the cap is skipped
    whole; the next one is read."""
    monkeypatch.setattr("elmo.io.inputs.MAX_DOCUMENT_CHARS", 20)
    path = tmp_path / "wiki_00"
    path.write_text('<doc id="1" title="Long">\nLong\nA first line.\nA second line.\n'
                    'A third.\n</doc>\n<doc id="2" title="Short">\nShort\nKept.\n</doc>\n',
                    encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        assert sentences_of(path) == ["Kept."]
    assert [str(w.message) for w in caught] == [
        f"{path}, line 1: document '1' is longer than 20 characters, too long to hold until "
        "its </doc>; close it with </doc>; skipped"]


def compressed(folder, into, compression: str):
    """WikiExtractor's folder `folder` again under `into`, its files compressed as its
    --compress writes them: bz2 (one stream per file, or per document as some of its versions
    write it), or gzip; returns `into`."""
    for path in sorted(p for p in folder.rglob("wiki_*")):
        text = path.read_bytes()
        if compression == "bz2-per-document":
            docs = [d + b"</doc>\n" for d in text.split(b"</doc>\n")[:-1]]
            data, suffix = b"".join(bz2.compress(d) for d in docs), ".bz2"
        elif compression == "bz2":
            data, suffix = bz2.compress(text), ".bz2"
        else:
            data, suffix = gzip.compress(text), ".gz"
        target = into / path.relative_to(folder).parent / (path.name + suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return into


@pytest.mark.parametrize("compression", ["bz2", "bz2-per-document", "gz"])
def test_a_compressed_wikiextractor_folder_reads_as_its_text(tmp_path, compression):
    corpus = write_documents(tmp_path)
    folder = compressed(corpus["wikiextractor"], tmp_path / "packed", compression)
    files = expand_paths([folder])
    suffix = ".gz" if compression == "gz" else ".bz2"
    assert [f.relative_to(folder).as_posix() for f in files] == [
        f"AA/wiki_00{suffix}", f"AA/wiki_01{suffix}", f"AB/wiki_00{suffix}"]
    assert {input_kind(f).name for f in files} == {"wikiextractor"}
    want = corpus["text"].read_text(encoding="utf-8").splitlines()
    assert sentences_of(folder) == want
    cut = tmp_path / "cut" / f"wiki_00{suffix}"  # a file cut short is named
    cut.parent.mkdir()
    cut.write_bytes(files[0].read_bytes()[:-30])
    broken = f"{cut} is not a complete compressed file \\((bzip2|gzip): "
    with pytest.raises(InputFileError, match=broken):
        sentences_of(cut)


def test_compressed_files_are_told_by_their_bytes_and_named_as_their_text(tmp_path):
    text = "One line .\nTwo lines .\n"
    (tmp_path / "notes.txt").write_bytes(bz2.compress(text.encode()))  # any name
    assert sentences_of(tmp_path / "notes.txt") == ["One line .", "Two lines ."]
    (tmp_path / "seqs.fa.bz2").write_bytes(bz2.compress(b">p1\nMKV\n"))
    assert input_kind(tmp_path / "seqs.fa.bz2").name == "fasta"
    (tmp_path / "BZh.txt").write_text("BZh is how this line starts\n")  # not bzip2
    assert sentences_of(tmp_path / "BZh.txt") == ["BZh is how this line starts"]


def test_a_wikiextractor_folders_other_files_are_named_and_skipped(tmp_path):
    (tmp_path / "AA").mkdir()
    (tmp_path / "AA" / "wiki_00").write_text('<doc id="1" title="a">\na\n</doc>\n')
    (tmp_path / "README.txt").write_text("not a wiki file\n")
    (tmp_path / "AA" / "notes.txt").write_text("nor this\n")
    (tmp_path / ".hidden").write_text("left out\n")
    with pytest.warns(UserWarning) as caught:
        assert expand_paths([tmp_path]) == [tmp_path / "AA" / "wiki_00"]
    assert [str(w.message) for w in caught] == [
        f"{tmp_path}: read as WikiExtractor's output, its 1 wiki_NN file(s); skipped 2 other "
        f"file(s): AA/notes.txt, README.txt (to choose the files, pass a quoted glob such as "
        f"'{tmp_path}/*/wiki_*')"]
    (tmp_path / "AA" / "wiki_00").unlink()  # no wiki_NN file: not WikiExtractor's output
    with pytest.raises(InputFileError, match="is a directory, not a text file"):
        expand_paths([tmp_path])


def test_malformed_json_lines_are_named_and_skipped(tmp_path):
    path = tmp_path / "dump.jsonl"
    path.write_text('{"text": "One. Two."}\n'  # line 1
                    "\n"
                    '{"text": "Three.", \n'  # line 3: cut short
                    '["text"]\n'  # line 4: not an object
                    '{"text": 5}\n'  # line 5: no text string
                    '{"id": 7, "text": "Four.\\n\\nFive."}\n', encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        got = sentences_of(path)
    assert got == ["One.", "Two.", "Four.", "Five."]
    messages = [str(w.message) for w in caught]
    assert messages[0].startswith(f"{path}, line 3: not JSON (")
    assert messages[1:] == [f"{path}, line {n}: not a JSON object with a 'text' or 'content' "
                            "string; skipped" for n in (4, 5)]
    assert all(m.endswith("; skipped") for m in messages)


def test_malformed_wikiextractor_documents_are_named_and_skipped(tmp_path):
    path = tmp_path / "wiki_00"
    lines = [
        '<doc id="1" url="?curid=1" title="Good">',  # 1
        "Good",
        "",
        "Kept one.",
        "</doc>",  # 5
        "Stray text.",  # 6: outside a document
        '<doc id="2" url="?curid=2" title="Unclosed">',  # 7
        "Lost one.",
        '<doc url="?curid=3" title="No id">',  # 9
        "Lost two.",
        "</doc>",
        "</doc>",  # 12: closes nothing
        '<doc id="4" url="?curid=4" title="Also good">',  # 13
        "Kept two. Kept three.",
        "</doc>",
        '<doc id="5" url="?curid=5" title="Cut off">',  # 16
        "Lost three.",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        got = sentences_of(path)
    assert got == ["Kept one.", "Kept two.", "Kept three."]
    assert [str(w.message) for w in caught] == [
        f"{path}, line 6: text outside a <doc> ... </doc> document; skipped",
        f"{path}, line 7: document '2' has no </doc> before the next <doc>; skipped",
        f'{path}, line 9: a <doc> header without id="..."; skipped',
        f"{path}, line 12: </doc> without a <doc> before it; skipped",
        f"{path}, line 16: document '5' has no </doc> before the end of the file; skipped",
    ]


def test_after_a_few_named_the_malformed_lines_of_a_file_are_counted(tmp_path):
    path = tmp_path / "dump.jsonl"
    path.write_text("".join("{oops\n" if i % 2 else '{"text": "Fine."}\n' for i in range(60)))
    with pytest.warns(UserWarning) as caught:
        assert sentences_of(path) == ["Fine."] * 30
    messages = [str(w.message) for w in caught]
    assert len(messages) == MAX_NAMED + 1
    assert messages[-1] == f"{path}: 20 more malformed lines or documents skipped (30 in all)"


def test_the_readers_stream(tmp_path):
    """Reading a WikiExtractor file or a JSON lines file of over 2 MB holds a line (or a document)
    and I/O buffers, never the file."""
    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghij", k=8)) for _ in range(200)]

    def paragraph() -> str:
        return " ".join(" ".join(rng.choices(words, k=12)) + "." for _ in range(4))

    docs = [[paragraph() for _ in range(5)] for _ in range(1200)]
    wiki = tmp_path / "wiki_00"
    wiki.write_text("".join(f'<doc id="{i}" url="?curid={i}" title="t{i}">\nt{i}\n\n'
                            + "\n".join(d) + "\n</doc>\n" for i, d in enumerate(docs)))
    jsonl = tmp_path / "docs.jsonl.gz"
    jsonl.write_bytes(gzip.compress("".join(json.dumps({"text": "\n".join(d)}) + "\n"
                                            for d in docs).encode()))
    assert wiki.stat().st_size > 2_000_000
    for path in (wiki, jsonl):
        tracemalloc.start()
        try:
            n = count_tokens([path])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert n == 1200 * 5 * 4 * 13
        assert peak < 256 * 1024, f"peak {peak} bytes while reading {path.name}"


def test_paragraphs_are_split_by_the_splitter_of_the_tokenizers_language():
    assert {kind.language for kind in TOKENIZERS.values()} <= set(SPLITTERS)
    assert split_language("whitespace") == "en" and split_language("jieba") == "zh"
    english = SPLITTERS["en"].split
    assert english('Dr. Smith moved to the U.S. in Jan. 1950, e.g. to St. Louis. It rained. '
                   '"Really?" he asked. The value was 3.14 there.') == [
        "Dr. Smith moved to the U.S. in Jan. 1950, e.g. to St. Louis.", "It rained.",
        '"Really?" he asked.', "The value was 3.14 there."]
    chinese = SPLITTERS["zh"].split
    want = ["更感到其艺术的魅力。", "2000年的比赛令观众赞叹！", "他说：“好的。”", "然后出发了？",
            "最后"]
    assert chinese("".join(want)) == want


def test_chinese_json_lines_are_split_after_the_full_stops(tmp_path):
    path = tmp_path / "zh.jsonl"
    path.write_text(json.dumps({"text": "我们去公园。今天天气很好！\n你呢？"}, ensure_ascii=False)
                    + "\n" + json.dumps({"title": "题", "content": "我也去。"},
                                         ensure_ascii=False) + "\n", encoding="utf-8")
    assert list(iter_sentences([path], "chars")) == [
        list("我们去公园。"), list("今天天气很好！"), list("你呢？"), list("我也去。")]


@pytest.mark.parametrize("kind", ["wikiextractor", "jsonl", "wikiextractor-bz2-untidy"])
def test_a_wikiextractor_folder_and_a_json_lines_file_train_and_resume_as_their_text(
        tmp_path, kind):
    """A run on each, stopped at step 10 and resumed to 20, ends bit-identical to the run on
    the same sentences as text, one per line; so does a folder of WikiExtractor --compress
    files with a stray README.txt (skipped, with a note naming it)."""
    corpus = write_documents(tmp_path)
    reference = run(tiny_config(corpus["text"], max_steps=20), tmp_path / "text")
    assert reference.step == 20
    if kind == "wikiextractor-bz2-untidy":
        corpus[kind] = compressed(corpus["wikiextractor"], tmp_path / "packed", "bz2")
        (corpus[kind] / "README.txt").write_text("Extracted with WikiExtractor.\n")
    out = tmp_path / kind
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(tiny_config(corpus[kind], max_steps=10), out)
        assert run(tiny_config(corpus[kind], max_steps=20), out).step == 20
    notes = {str(w.message) for w in caught}
    assert notes == ({f"{corpus[kind]}: read as WikiExtractor's output, its 3 wiki_NN file(s); "
                      f"skipped 1 other file(s): README.txt (to choose the files, pass a quoted "
                      f"glob such as '{corpus[kind]}/*/wiki_*')"}
                     if kind.endswith("untidy") else set())  # nothing malformed here
    assert_identical(run_files(out), run_files(tmp_path / "text"))


def test_the_vocab_command_reads_the_input_kinds(tmp_path, capsys):
    corpus = write_documents(tmp_path)
    for name in ("text", "wikiextractor"):
        assert main(["vocab", "--train", str(corpus[name]), "--out",
                     str(tmp_path / f"{name}.vocab"), "--quiet"]) == 0
    assert (tmp_path / "text.vocab").read_text() == (tmp_path / "wikiextractor.vocab").read_text()
    train, _ = write_corpus(tmp_path / "plain")
    assert main(["vocab", "--train", str(train), "--input-format", "jsonl", "--out",
                 str(tmp_path / "none.vocab"), "--quiet"]) == 1
    assert "no sentences" in capsys.readouterr().err
