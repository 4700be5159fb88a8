"""`elmo analyze wsd`: WordNet first senses, the framework and NAF readers, 1-NN sense
vectors and the framework scorer's rules, all on hand-made files."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest

from elmo import save_pretrained
from elmo.analysis.wordnet import WordNet
from elmo.analysis.wsd import SenseVectors, WsdScore, evaluate_wsd, score_set
from elmo.analysis.wsd_data import (
    SenseTarget,
    find_eval_sets,
    read_framework,
    read_sense_corpus,
)
from elmo.cli import main
from elmo.embed import Embedder
from elmo.errors import ElmoError
from tests.conftest import random_bilm

HEADER = "  1 This software and database: WordNet 3.0 Copyright 2006 by Princeton University.  \n"

# (name, lex_filenum, ss_type, [(word, lex_id)], [(pointer, target name, target pos)])
SYNSETS = {
    "noun": [
        ("bank_river", "17", "n", [("bank", 0)], []),
        ("bank_money", "14", "n", [("depository_financial_institution", 0), ("bank", 1)], []),
        ("cat", "05", "n", [("cat", 0), ("true_cat", 0)], []),
        ("friday", "28", "n", [("Friday", 0), ("Fri", 0)], []),
    ],
    "verb": [("run", "38", "v", [("run", 0)], [])],
    "adj": [
        ("unusual", "00", "a", [("unusual", 0)], []),
        ("odd", "00", "s", [("curious", 0), ("odd", 2), ("peculiar(a)", 0)],
         [("&", "unusual", "a")]),
    ],
    "adv": [("quickly", "02", "r", [("quickly", 0)], [])],
}
INDEX = {
    "noun": {"bank": ["bank_river", "bank_money"], "cat": ["cat"], "friday": ["friday"]},
    "verb": {"run": ["run"]},
    "adj": {"peculiar": ["odd"], "unusual": ["unusual"], "odd": ["odd"]},
    "adv": {"quickly": ["quickly"]},
}
POS_LETTER = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}


def write_wordnet(directory):
    """index.POS and data.POS files with true byte offsets, as WordNet's grind writes them."""
    directory.mkdir()
    offsets = {}

    def line(entry, offset_of):
        name, lex_filenum, ss_type, words, pointers = entry
        fields = [f"{offset_of(name):08d}", lex_filenum, ss_type, f"{len(words):02x}"]
        fields += [f"{w} {i:x}" for w, i in words] + [f"{len(pointers):03d}"]
        fields += [f"{p} {offset_of(t):08d} {pos} 0000" for p, t, pos in pointers]
        return " ".join(fields) + f" | gloss of {name}  \n"

    for entries in SYNSETS.values():  # offsets do not depend on values: fixed widths
        position = len(HEADER.encode())
        for entry in entries:
            offsets[entry[0]] = position
            position += len(line(entry, lambda _: 0).encode())
    for pos, entries in SYNSETS.items():
        text = HEADER + "".join(line(e, offsets.__getitem__) for e in entries)
        (directory / f"data.{pos}").write_text(text, encoding="utf-8")
        rows = [f"{lemma} {POS_LETTER[pos]} {len(names)} 1 @ {len(names)} 0 "
                + " ".join(f"{offsets[n]:08d}" for n in names) + "  \n"
                for lemma, names in sorted(INDEX[pos].items())]
        (directory / f"index.{pos}").write_text(HEADER + "".join(rows), encoding="utf-8")
    return directory


@pytest.fixture
def wordnet_dir(tmp_path):
    return write_wordnet(tmp_path / "dict")


def test_first_sense_keys_follow_index_order_and_satellite_heads(wordnet_dir):
    wn = WordNet(wordnet_dir)
    assert wn.first_sense_key("bank", "n") == "bank%1:17:00::"
    assert wn.first_sense_key("Friday", "n") == "friday%1:28:00::"  # lower case in keys
    assert wn.first_sense_key("run", "v") == "run%2:38:00::"
    assert wn.first_sense_key("quickly", "r") == "quickly%4:02:00::"
    # a satellite: ss_type 5 and its head synset's first word; `(a)` is not part of a key
    assert wn.first_sense_key("odd", "a") == "odd%5:00:02:unusual:00"
    assert wn.first_sense_key("peculiar", "a") == "peculiar%5:00:00:unusual:00"
    assert wn.first_sense_key("bank", "v") is None
    assert wn.first_sense_key("platypus", "n") is None


def test_missing_wordnet_says_what_is_missing_and_how_to_get_it(tmp_path, wordnet_dir):
    with pytest.raises(ElmoError, match="does not exist.*apt-get install wordnet-base"):
        WordNet(tmp_path / "nowhere")
    (wordnet_dir / "data.verb").unlink()
    with pytest.raises(ElmoError, match=r"lacks data\.verb.*--wordnet DIR"):
        WordNet(wordnet_dir)


def test_wordnet_default_location_follows_wnhome(tmp_path, wordnet_dir, monkeypatch):
    monkeypatch.delenv("WNSEARCHDIR", raising=False)
    monkeypatch.setenv("WNHOME", str(tmp_path))  # WordNet's layout: $WNHOME/dict
    assert WordNet().first_sense_key("cat", "n") == "cat%1:05:00::"


def test_malformed_index_line_names_file_and_line(wordnet_dir):
    path = wordnet_dir / "index.noun"
    path.write_text(path.read_text() + "broken n x\n")
    with pytest.raises(ElmoError, match=r"index\.noun, line 5"):
        WordNet(wordnet_dir).first_sense_key("cat", "n")


EVAL_XML = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="toy">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="the" pos="DET">The</wf>
<instance id="d000.s000.t000" lemma="cat" pos="NOUN">cat</instance>
<instance id="d000.s000.t001" lemma="run" pos="VERB">ran</instance>
<wf lemma="to" pos="PRT">to</wf>
<wf lemma="the" pos="DET">the</wf>
<instance id="d000.s000.t002" lemma="bank" pos="NOUN">bank</instance>
</sentence>
<sentence id="d000.s001">
<instance id="d000.s001.t000" lemma="river_bank" pos="NOUN">river bank</instance>
<instance id="d000.s001.t001" lemma="peculiar" pos="ADJ">peculiar</instance>
</sentence>
</text>
</corpus>
"""
EVAL_KEYS = """d000.s000.t000 cat%1:05:00::
d000.s000.t001 run%2:38:00::
d000.s000.t002 bank%1:14:00:: bank%1:17:00::
d000.s001.t000 river_bank%1:17:00::
d000.s001.t001 peculiar%5:00:00:unusual:00
"""


def write_eval(directory, name="toy", xml=EVAL_XML, keys=EVAL_KEYS):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.data.xml").write_text(xml, encoding="utf-8")
    (directory / f"{name}.gold.key.txt").write_text(keys, encoding="utf-8")
    return directory / f"{name}.data.xml"


def test_framework_reader_spans_multiwords_and_several_gold_keys(tmp_path):
    sentences = read_framework(write_eval(tmp_path))
    assert sentences[0].tokens == ["The", "cat", "ran", "to", "the", "bank"]
    bank = sentences[0].targets[2]
    assert (bank.start, bank.end, bank.lemma, bank.pos) == (5, 6, "bank", "n")
    assert bank.keys == ("bank%1:14:00::", "bank%1:17:00::")
    river = sentences[1].targets[0]
    assert sentences[1].tokens[river.start:river.end] == ["river", "bank"]
    assert sentences[1].targets[1].pos == "a"


@pytest.mark.parametrize("xml, keys, message", [
    (EVAL_XML.replace("</sentence>\n<sentence", "<sentence", 1), EVAL_KEYS,
     r"toy\.data\.xml: not well-formed XML at line \d+"),
    (EVAL_XML, EVAL_KEYS.replace("d000.s000.t001 run%2:38:00::\n", ""),
     r"toy\.gold\.key\.txt: no gold key for instance d000\.s000\.t001"),
    (EVAL_XML, EVAL_KEYS + "d000.s009.t000\n", r"toy\.gold\.key\.txt, line 6: expected"),
    (EVAL_XML.replace('pos="VERB"', 'pos="VRB"'), EVAL_KEYS, r"toy\.data\.xml: <instance>"),
])
def test_malformed_evaluation_files_name_the_file(tmp_path, xml, keys, message):
    with pytest.raises(ElmoError, match=message):
        read_framework(write_eval(tmp_path, xml=xml, keys=keys))


def test_missing_gold_file_and_eval_set_discovery(tmp_path):
    write_eval(tmp_path / "sets" / "ALL", "ALL")
    write_eval(tmp_path / "sets" / "zeta", "zeta")
    write_eval(tmp_path / "sets" / "senseval2", "senseval2")
    names = [s.name for s in find_eval_sets([tmp_path / "sets"])]
    assert names == ["senseval2", "ALL", "zeta"]  # the framework's order, then by name
    (tmp_path / "sets" / "zeta" / "zeta.gold.key.txt").unlink()
    with pytest.raises(ElmoError, match="gold key file not found: .*zeta.gold.key.txt"):
        read_framework(tmp_path / "sets" / "zeta" / "zeta.data.xml")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ElmoError, match="empty: no \\*.data.xml files"):
        find_eval_sets([empty])


def naf(sentences_xml: str, terms_xml: str) -> str:
    return (f"<?xml version='1.0' encoding='UTF-8'?>\n<NAF><text>{sentences_xml}</text>"
            f"<terms>{terms_xml}</terms></NAF>\n")


def term(id_, pos, lemma, wf, key):
    refs = "" if key is None else (
        f'<externalReferences><externalRef reference="{key}" resource="WordNet-eng30" '
        f'reftype="lexical_key"/></externalReferences>')
    return (f'<term id="{id_}" pos="{pos}" lemma="{lemma}"><span><target id="{wf}"/></span>'
            f"{refs}</term>")


NAF_DOC = naf(
    '<wf id="w0" sent="1">The</wf><wf id="w1" sent="1">Fulton_County_Grand_Jury</wf>'
    '<wf id="w2" sent="1">took_place</wf><wf id="w3" sent="1">oddly</wf>'
    '<wf id="w4" sent="2">An</wf><wf id="w5" sent="2">odd</wf><wf id="w6" sent="2">bank</wf>',
    term("t0", "DT", "the", "w0", None)
    + term("t1", "NNP", "group", "w1", "1:03:00::")  # proper-name class: skipped
    + term("t2", "VB", "take_place", "w2", "2:30:00::")
    + term("t4", "DT", "an", "w4", None)
    + term("t5", "JJ", "odd", "w5", "5:00:02:unusual(a):00;3:00:00::")
    + term("t6", "NN", "bank", "w6", "1:17:00::"),
)


def test_naf_reader_keys_markers_multiwords_and_proper_names(tmp_path):
    path = tmp_path / "doc.naf"
    path.write_text(NAF_DOC, encoding="utf-8")
    first, second = list(read_sense_corpus(path))
    assert first.tokens == ["The", "Fulton", "County", "Grand", "Jury", "took", "place", "oddly"]
    (took,) = first.targets  # the NNP annotation is not a sense of its words
    assert (took.start, took.end, took.keys, took.pos) == (5, 7, ("take_place%2:30:00::",), "v")
    odd = second.targets[0]
    assert odd.keys == ("odd%5:00:02:unusual:00", "odd%3:00:00::") and odd.pos == "a"


def test_naf_archive_and_directory_read_the_same_and_damage_is_named(tmp_path):
    docs = tmp_path / "semcor"
    (docs / "brown1").mkdir(parents=True)
    (docs / "brown1" / "br-a01.naf").write_text(NAF_DOC, encoding="utf-8")
    archive = tmp_path / "semcor.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(docs, arcname="semcor")
        bad = NAF_DOC.replace("</terms>", "").encode()
        info = tarfile.TarInfo("semcor/brown2/br-z99.naf")
        info.size = len(bad)
        tar.addfile(info, io.BytesIO(bad))
    from_dir = [s.tokens for s in read_sense_corpus(docs)]
    reader = read_sense_corpus(archive)
    assert [s.tokens for s in [next(reader), next(reader)]] == from_dir
    with pytest.raises(ElmoError, match=r"semcor\.tar\.xz:semcor/brown2/br-z99\.naf: not "
                       "well-formed XML"):
        next(reader)
    with pytest.raises(ElmoError, match="not found; give SemCor as NAF"):
        next(read_sense_corpus(tmp_path / "missing.tar.xz"))


def target(lemma, pos, *keys):
    return SenseTarget(f"{lemma}.{len(keys)}", 0, 1, lemma, pos, keys)


def test_sense_vectors_are_means_and_the_nearest_sense_wins(wordnet_dir):
    e = np.eye(3, dtype=np.float32)
    # one layer (L+1 = 1), 3 dimensions: bank%river near e0, bank%money near e1
    training = [
        (target("bank", "n", "bank%1:17:00::"), e[None, 0] * 2),
        (target("bank", "n", "bank%1:17:00::"), (e[None, 0] + e[None, 2]) * 2),
        (target("bank", "n", "bank%1:14:00::"), e[None, 1]),
        (target("odd", "a", "odd%5:00:02:unusual:00", "odd%3:00:00::"), e[None, 2]),
    ]
    senses = SenseVectors.from_occurrences(training)
    river = senses.keys.index("bank%1:17:00::")
    np.testing.assert_allclose(senses.vectors[0, river], [2, 0, 1] / np.sqrt(5), rtol=1e-6)
    assert senses.counts[river] == 2
    assert senses.nearest("bank", "n", np.array([[0.2, 0.9, 0.0]])) == ["bank%1:14:00::"]
    assert senses.nearest("bank", "n", np.array([[0.9, 0.2, 0.3]])) == ["bank%1:17:00::"]
    assert senses.nearest("odd", "a", e[None, 2]) in (["odd%5:00:02:unusual:00"],
                                                      ["odd%3:00:00::"])
    assert senses.nearest("bank", "v", e[None, 0]) is None

    wn = WordNet(wordnet_dir)
    test = [
        (target("bank", "n", "bank%1:14:00::", "bank%1:17:00::"), e[None, 0]),  # 2 gold: hit
        (target("bank", "n", "bank%1:14:00::"), e[None, 0]),  # answers river: miss
        (target("cat", "n", "cat%1:05:00::"), e[None, 1]),  # unseen: first sense, hit
        (target("run", "v", "run%2:99:00::"), e[None, 1]),  # unseen: first sense, miss
        (target("zebra", "n", "zebra%1:05:00::"), e[None, 1]),  # not in WordNet: no answer
    ]
    (layer,), baseline, backoff = score_set(senses, wn, test)
    assert (layer.correct, layer.answered, layer.total) == (2, 4, 5)
    assert (baseline.correct, baseline.answered, baseline.total) == (2, 4, 5)  # bank%1:17 first
    assert backoff == pytest.approx(3 / 5)
    precision, recall = 2 / 4, 2 / 5
    assert layer.f1 == pytest.approx(100 * 2 * precision * recall / (precision + recall))
    assert WsdScore(0, 3, 4).f1 == 0.0


TRAIN_XML = """<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="train">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="a" pos="DET">A</wf>
<instance id="d000.s000.t000" lemma="cat" pos="NOUN">cat</instance>
<instance id="d000.s000.t001" lemma="run" pos="VERB">ran</instance>
<wf lemma="to" pos="PRT">to</wf>
<wf lemma="a" pos="DET">a</wf>
<instance id="d000.s000.t002" lemma="bank" pos="NOUN">bank</instance>
</sentence>
</text>
</corpus>
"""
TRAIN_KEYS = "d000.s000.t000 cat%1:05:00::\nd000.s000.t001 run%2:38:01::\n" \
    "d000.s000.t002 bank%1:14:00::\n"


def test_evaluate_wsd_end_to_end_with_a_biLM(tmp_path, wordnet_dir):
    train = write_eval(tmp_path / "train", "semcor", TRAIN_XML, TRAIN_KEYS)
    eval_sets = find_eval_sets([write_eval(tmp_path / "eval")])
    embedder = Embedder(random_bilm(seed=3))
    result = evaluate_wsd(embedder, read_sense_corpus(train), eval_sets, WordNet(wordnet_dir),
                          progress=False)
    # Each lemma seen has one sense, which 1-NN must answer at every layer: cat right, bank
    # right (one of its two gold keys), run wrong (only run%2:38:01:: was seen). Unseen:
    # peculiar backs off to its first sense (right), river_bank is not in WordNet (no answer).
    assert result.instances == {"toy": 5} and result.backoff == {"toy": 2 / 5}
    f1 = 100 * 2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5)
    assert result.f1 == {str(k): {"toy": pytest.approx(f1)} for k in range(3)}
    # first senses: cat, run, bank (bank%1:17:00::, the other gold key), peculiar right
    assert result.first_sense == {"toy": pytest.approx(100 * 2 * 1 * (4 / 5) / (1 + 4 / 5))}
    assert result.senses == 3


def test_cli_json_and_missing_wordnet(tmp_path, wordnet_dir, capsys):
    model = save_pretrained(random_bilm(seed=5), tmp_path / "model")
    data = write_eval(tmp_path / "eval")
    args = ["analyze", "wsd", "--model", str(model), "--train", str(data), "--eval",
            str(data), "--quiet"]
    assert main([*args, "--wordnet", str(wordnet_dir), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["f1"]) == {"0", "1", "2"} and set(result["f1"]["1"]) == {"toy"}
    assert 0 <= result["f1"]["1"]["toy"] <= 100
    assert main([*args, "--wordnet", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("elmo: error: WordNet not found") and "wordnet-base" in err
    assert "Traceback" not in err
