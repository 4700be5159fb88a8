"""Documents left out by title (elmo.io.titles, `--exclude-titles`): a test set's articles out of
a training corpus, named by a WikiText file's headings or a list of titles, compared
normalized; the count reported; documents without a title kept. And a validation split of
one's own (`elmo prepare-corpus --hold-out-every N`)."""

from __future__ import annotations

import json

import pytest

from elmo.cli import main
from elmo.data.corpus import Selection, Tally, expand_paths, iter_lines
from elmo.data.prepared import HELD_OUT_NAME, MANIFEST_NAME, PreparedCorpus, open_corpus
from elmo.errors import InputFileError
from elmo.io.titles import read_titles, title_key
from elmo.vocab import Vocabulary
from tests.helpers.training import run, tiny_config

# Title, then the text of an article (each article's words its own, to be looked for).
ARTICLES = {
    "American Beauty (1999 film)": "Lester Burnham narrates the film. Critics praised it.",
    "M-82 (Michigan highway)": "The trunkline crosses Newaygo County. Its route is rural.",
    "Robert Boulter": "Boulter acted in theatre productions. He was born in Hertfordshire.",
    "Anarchism": "Anarchism rejects hierarchies. Its history is long.",
    "Zebra": "Zebras have stripes. They live in Africa.",
    "Hannah Dodd": "Dodd is an actress. She played Francesca.",
}
# WikiText's text of some of them (a line with a space either side, a blank one a space): the
# headings tokenized, an unknown word as <unk>, sections, a table line that is no heading.
WIKITEXT = "".join(f" {line} \n" if line else " \n" for line in [
    "", "= American Beauty ( 1999 film ) =", "", "Lester Burnham narrates the film .", "",
    "= = Plot = =", "", "= M @-@ 82 ( Michigan highway ) =", "",
    "The trunkline crosses <unk> County .", "= Robert <unk> =", "", "= <unk> =", "",
    "= National record"])


def write_wiki(folder):
    """A WikiExtractor folder of ARTICLES, two files, each document's title repeated as its
    first line."""
    docs = [f'<doc id="{i}" url="?curid={i}" title="{title}">\n{title}\n\n{text}\n</doc>\n'
            for i, (title, text) in enumerate(ARTICLES.items())]
    for name, part in (("wiki_00", docs[:3]), ("wiki_01", docs[3:])):
        (folder / "AA").mkdir(parents=True, exist_ok=True)
        (folder / "AA" / name).write_text("".join(part), encoding="utf-8")
    return folder


@pytest.fixture
def wiki(tmp_path):
    titles = tmp_path / "test.txt"
    titles.write_text(WIKITEXT, encoding="utf-8")
    return {"wiki": write_wiki(tmp_path / "wiki"), "titles": titles}


def test_titles_are_compared_normalized():
    assert title_key("M @-@ 82 ( Michigan highway )") == title_key("M-82 (Michigan highway)")
    assert title_key("2011 – 12 Michigan Wolverines men 's team") == title_key(
        "2011–12  Michigan Wolverines men's team")
    assert title_key("1 @,@ 000 Days") == title_key("1,000 days")
    assert title_key("U.S. Route 2") == title_key("U . S . Route 2")
    assert title_key("Tom &amp; Jerry") == title_key("tom & jerry")
    assert title_key("Ben Amos") != title_key("Ben Amoss")


def test_a_wikitext_file_names_its_articles_and_unk_is_any_one_word(wiki):
    titles = read_titles([wiki["titles"]])
    assert titles.size == 4 and titles.unmatched == ("<unk>",)  # no sections, no table line
    assert "American Beauty (1999 film)" in titles and "M-82 (Michigan highway)" in titles
    assert "Robert Boulter" in titles and "robert boulter" in titles
    assert "Robert Boulter Smith" not in titles and "Robert" not in titles
    assert "Plot" not in titles and "Zebra" not in titles and "" not in titles


def test_a_list_of_titles_a_line_each(tmp_path):
    path = tmp_path / "titles.txt"
    path.write_text("Zebra\n\n  Hannah Dodd \n", encoding="utf-8")
    titles = read_titles([path])
    assert titles.size == 2 and "zebra" in titles and "Hannah  Dodd" in titles
    assert "Anarchism" not in titles


def test_a_missing_or_empty_titles_file_is_named(tmp_path):
    with pytest.raises(InputFileError, match="does not exist"):
        read_titles([tmp_path / "nothing.txt"])
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputFileError, match="blank.txt names no title"):
        read_titles([tmp_path / "blank.txt"])


def test_documents_without_a_title_are_kept(tmp_path, wiki):
    text = tmp_path / "lines.txt"
    text.write_text("Zebra\nAnarchism rejects hierarchies.\n", encoding="utf-8")
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"id": "1", "text": "Zebras have stripes."}) + "\n"
                     + json.dumps({"id": "2", "title": "Zebra", "text": "Stripes."}) + "\n",
                     encoding="utf-8")
    (tmp_path / "zebra.txt").write_text("Zebra\n", encoding="utf-8")
    selection, tally = Selection(read_titles([tmp_path / "zebra.txt"])), Tally()
    got = list(iter_lines([text, jsonl], selection=selection, tally=tally))
    assert got == ["Zebra", "Anarchism rejects hierarchies.", "Zebras have stripes."]
    assert (tally.left_out, tally.left_out_titles) == (1, ["Zebra"])


def test_prepare_corpus_leaves_the_articles_out_and_counts_them(tmp_path, wiki, capsys):
    out = tmp_path / "prepared"
    assert main(["prepare-corpus", "--train", str(wiki["wiki"]), "--out", str(out),
                 "--exclude-titles", str(wiki["titles"])]) == 0
    assert "3 documents left out by title" in capsys.readouterr().err
    corpus = PreparedCorpus(out)
    words = {w for sentence in corpus.sentences() for w in sentence}
    assert {"Zebras", "Anarchism", "Dodd"} <= words
    assert not words & {"Burnham", "trunkline", "Hertfordshire"}  # nor in the vocabulary:
    assert not {"Burnham", "trunkline", "Hertfordshire"} & set(corpus.vocab)
    manifest = json.loads((out / MANIFEST_NAME).read_text(encoding="utf-8"))
    assert manifest["left_out"] == 3 and manifest["exclude_titles"] == [str(wiki["titles"])]
    assert manifest["left_out_titles"] == list(ARTICLES)[:3]
    assert manifest["n_sentences"] == 6  # two a kept article


def test_training_reads_the_same_selection(tmp_path, wiki, capsys):
    """`elmo train` and `elmo vocab` leave out what prepare-corpus does; a prepared corpus
    is read as it was prepared."""
    config = tiny_config(wiki["wiki"], exclude_titles=[wiki["titles"]], max_steps=2,
                         batch_size=2, unroll_steps=4)
    assert run(config, tmp_path / "run").step == 2
    trained = Vocabulary.from_file(tmp_path / "run" / "vocab.txt")
    assert "Zebras" in trained and "Burnham" not in trained
    corpus = open_corpus([str(wiki["wiki"])], "whitespace", exclude_titles=[wiki["titles"]])
    assert [" ".join(s) for s in corpus.sentences()] == list(iter_lines(
        expand_paths([wiki["wiki"]]), selection=Selection(read_titles([wiki["titles"]]))))
    assert len(list(corpus.sentences())) == 6
    vocab = tmp_path / "vocab.txt"
    assert main(["vocab", "--train", str(wiki["wiki"]), "--out", str(vocab),
                 "--exclude-titles", str(wiki["titles"])]) == 0
    assert "3 documents left out by title" in capsys.readouterr().err
    assert "Burnham" not in Vocabulary.from_file(vocab) and "Zebras" in Vocabulary.from_file(
        vocab)
    prepared = tmp_path / "prepared"
    assert main(["prepare-corpus", "--train", str(wiki["wiki"]), "--out", str(prepared),
                 "--quiet"]) == 0
    with pytest.raises(InputFileError, match="prepare-corpus --exclude-titles"):
        open_corpus([str(prepared)], "whitespace", exclude_titles=[wiki["titles"]])


def test_hold_out_every_nth_document(tmp_path, wiki, capsys):
    """Of the documents kept (Anarchism, Zebra, Hannah Dodd), the second is held out: its
    sentences, a line each, in held-out.txt, and neither in the shards nor the vocabulary."""
    out = tmp_path / "prepared"
    assert main(["prepare-corpus", "--train", str(wiki["wiki"]), "--out", str(out),
                 "--exclude-titles", str(wiki["titles"]), "--hold-out-every", "2"]) == 0
    assert f"1 documents held out: 2 sentences in {HELD_OUT_NAME}" in capsys.readouterr().err
    assert (out / HELD_OUT_NAME).read_text(encoding="utf-8") == (
        "Zebras have stripes.\nThey live in Africa.\n")
    corpus = PreparedCorpus(out)
    assert "Zebras" not in corpus.vocab
    assert [" ".join(s) for s in corpus.sentences()] == [
        "Anarchism rejects hierarchies.", "Its history is long.", "Dodd is an actress.",
        "She played Francesca."]
    manifest = corpus.manifest
    assert (manifest.held_out, manifest.held_out_sentences, manifest.hold_out_every) == (
        1, 2, 2)
    with pytest.raises(SystemExit):
        main(["prepare-corpus", "--train", str(wiki["wiki"]), "--out", str(tmp_path / "x"),
              "--hold-out-every", "-1"])
