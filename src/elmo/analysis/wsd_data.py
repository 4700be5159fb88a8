"""Sense-annotated text: the WSD evaluation framework's XML and SemCor in NAF.

Both become `WsdSentence`s: the tokens to embed and the targets (a token span, lemma, WordNet
part of speech, sense keys). Multiword units (`took_place` in SemCor, `belong to` in the
evaluation sets) are split into their words; a target's vector is the mean over its span.
"""

from __future__ import annotations

import re
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from elmo.errors import ElmoError

from .wordnet import sense_key_pos

# The framework's universal tags and WordNet's letters; other tags carry no sense.
TARGET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r",
              "n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}
DATA_SUFFIX, KEY_SUFFIX = ".data.xml", ".gold.key.txt"
FRAMEWORK_ORDER = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015", "ALL")
_HEAD_MARKER = re.compile(r"\([a-z]+\)$")


@dataclass
class SenseTarget:
    """A sense-tagged span of a sentence: tokens[start:end]."""

    id: str
    start: int
    end: int
    lemma: str
    pos: str  # n, v, a or r
    keys: tuple[str, ...]


@dataclass
class WsdSentence:
    tokens: list[str]
    targets: list[SenseTarget]


@dataclass
class EvalSet:
    """One evaluation data set: `NAME.data.xml` and its `NAME.gold.key.txt`."""

    name: str
    data: Path
    keys: Path


def normalize_key(key: str) -> str:
    """A sense key as WordNet writes it: a satellite's head word without a marker like `(a)`."""
    lemma, _, rest = key.partition("%")
    parts = rest.split(":")
    if len(parts) == 5:
        parts[3] = _HEAD_MARKER.sub("", parts[3])
    return f"{lemma.lower()}%{':'.join(parts)}"


def read_gold_keys(path: str | Path) -> dict[str, tuple[str, ...]]:
    """`instance_id key [key ...]` per line -> {id: keys}."""
    path = Path(path)
    if not path.is_file():
        raise ElmoError(f"gold key file not found: {path}; each NAME.data.xml needs its "
                        f"NAME.gold.key.txt beside it (the WSD evaluation framework's layout)")
    gold: dict[str, tuple[str, ...]] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2 or "%" not in fields[1]:
                raise ElmoError(f"{path}, line {number}: expected `instance_id sense_key "
                                f"[sense_key ...]`, got {line.strip()[:80]!r}")
            gold[fields[0]] = tuple(fields[1:])
    return gold


def _parse_error(path: str, err: ET.ParseError, expected: str) -> ElmoError:
    line, column = err.position
    return ElmoError(f"{path}: not well-formed XML at line {line}, column {column}; "
                     f"expected {expected}")


def read_framework(data: str | Path, keys: str | Path | None = None) -> list[WsdSentence]:
    """A `*.data.xml` of the WSD evaluation framework (Raganato et al. 2017) with its keys.

    `<sentence>` holds `<wf>` (context) and `<instance id lemma pos>` (targets) in order;
    every instance needs a line in the key file (default: `NAME.gold.key.txt` beside it).
    """
    data = Path(data)
    if not data.is_file():
        raise ElmoError(f"evaluation file not found: {data}")
    if keys is None:
        keys = data.with_name(data.name.removesuffix(DATA_SUFFIX) + KEY_SUFFIX)
    gold = read_gold_keys(keys)
    sentences = []
    try:
        for _, element in ET.iterparse(data):
            if element.tag == "sentence":
                sentences.append(_framework_sentence(element, data, gold, keys))
                element.clear()
    except ET.ParseError as err:
        raise _parse_error(str(data), err, "the WSD evaluation framework's <corpus><text>"
                           "<sentence> with <wf> and <instance> elements") from None
    return sentences


def _framework_sentence(element: ET.Element, data: Path, gold: dict, keys: Path) -> WsdSentence:
    tokens: list[str] = []
    targets = []
    for child in element:
        words = (child.text or "").split()
        if child.tag == "instance":
            id_, lemma, pos = (child.get(a) for a in ("id", "lemma", "pos"))
            if id_ is None or lemma is None or pos not in TARGET_POS or not words:
                raise ElmoError(
                    f"{data}: <instance> {ET.tostring(child, encoding='unicode')[:120]!r} "
                    f"needs an id, a lemma, words and a pos among {sorted(TARGET_POS)}")
            if id_ not in gold:
                raise ElmoError(f"{keys}: no gold key for instance {id_} of {data}")
            targets.append(SenseTarget(id_, len(tokens), len(tokens) + len(words),
                                       lemma.lower(), TARGET_POS[pos], gold[id_]))
        tokens.extend(words)
    return WsdSentence(tokens, targets)


def read_naf(source: IO[bytes] | Path, name: str) -> list[WsdSentence]:
    """One SemCor document in NAF: `<wf sent>` tokens, `<term>`s with `lexical_key` references.

    The key is `lemma%lexical_key`; several keys joined by `;` are all kept. Terms tagged
    `NNP`/`NNPS` are skipped: SemCor tags proper names with a class (`group`, `person`),
    not a sense of the word.
    """
    try:
        root = ET.parse(source).getroot()
    except ET.ParseError as err:
        raise _parse_error(name, err, "a NAF document (<NAF><text><wf> ... <terms><term>)") \
            from None
    spans: dict[str, tuple[str, int, int]] = {}  # wf id -> (sentence, start, end)
    tokens: dict[str, list[str]] = {}
    for wf in root.iter("wf"):
        sent, words = wf.get("sent", ""), [w for w in (wf.text or "").split("_") if w]
        sentence = tokens.setdefault(sent, [])
        spans[wf.get("id", "")] = (sent, len(sentence), len(sentence) + len(words))
        sentence.extend(words)
    if not tokens:
        raise ElmoError(f"{name}: no <wf> tokens; expected a NAF document from SemCor")
    targets: dict[str, list[SenseTarget]] = {sent: [] for sent in tokens}
    for term in root.iter("term"):
        refs = [r.get("reference", "") for r in term.iter("externalRef")
                if r.get("reftype") == "lexical_key"]
        lemma = term.get("lemma")
        if not refs or not lemma or term.get("pos", "").startswith("NNP"):
            continue
        covered = [spans.get(t.get("id", "")) for t in term.iter("target")]
        if not covered or None in covered or len({s for s, _, _ in covered}) != 1:
            raise ElmoError(f"{name}: term {term.get('id')} spans unknown or several "
                            f"sentences' <wf> ids")
        keys = tuple(normalize_key(f"{lemma}%{ref}") for ref in refs[0].split(";") if ref)
        sent = covered[0][0]
        start, end = min(s for _, s, _ in covered), max(e for _, _, e in covered)
        if keys and end > start:
            try:
                pos = sense_key_pos(keys[0])
            except ElmoError as err:
                raise ElmoError(f"{name}: term {term.get('id')}: {err}") from None
            targets[sent].append(SenseTarget(f"{name}#{term.get('id')}", start, end,
                                             lemma.lower(), pos, keys))
    return [WsdSentence(tokens[s], targets[s]) for s in tokens]


def read_sense_corpus(path: str | Path) -> Iterator[WsdSentence]:
    """Sense-annotated training text (SemCor), streamed: a framework `*.data.xml` (keys beside
    it), a NAF file, a directory of NAF files, or a tar archive (.tar, .tar.xz, .tgz, ...)
    of NAF files."""
    path = Path(path)
    if path.name.endswith(DATA_SUFFIX):
        yield from read_framework(path)
    elif path.is_dir():
        files = sorted(path.rglob("*.naf"))
        if not files:
            raise ElmoError(f"{path}: no *.naf files in this directory; give SemCor in NAF "
                            f"(a directory, a .naf file or a tar archive) or a *.data.xml")
        for file in files:
            with open(file, "rb") as f:
                yield from read_naf(f, str(file))
    elif path.name.endswith(".naf"):
        with open(path, "rb") as f:
            yield from read_naf(f, str(path))
    elif path.is_file() and tarfile.is_tarfile(path):
        yield from _read_naf_archive(path)
    else:
        what = "not found" if not path.exists() else "not a NAF file, directory or tar archive"
        raise ElmoError(f"sense-annotated corpus {path}: {what}; give SemCor as NAF (file, "
                        f"directory or tar archive such as semcor3.0_naf.tar.xz) or as the "
                        f"framework's semcor.data.xml with semcor.gold.key.txt beside it")


def _read_naf_archive(path: Path) -> Iterator[WsdSentence]:
    found = False
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                if member.isfile() and member.name.endswith(".naf"):
                    found = True
                    yield from read_naf(archive.extractfile(member), f"{path}:{member.name}")
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ElmoError(f"{path}: damaged archive ({err}); download or unpack it again") \
            from None
    if not found:
        raise ElmoError(f"{path}: no *.naf files in this archive; expected SemCor in NAF")


def find_eval_sets(paths: list[str | Path]) -> list[EvalSet]:
    """Evaluation sets from `*.data.xml` files or directories searched for them, in the
    framework's usual order (senseval2 ... semeval2015, ALL), then by name."""
    sets: dict[str, EvalSet] = {}
    for given in map(Path, paths):
        if given.is_dir():
            files = sorted(given.rglob(f"*{DATA_SUFFIX}"))
            if not files:
                raise ElmoError(f"{given}: no *{DATA_SUFFIX} files (the WSD evaluation "
                                f"framework's Evaluation_Datasets directory holds them)")
        elif given.name.endswith(DATA_SUFFIX):
            files = [given]
        else:
            what = "not found" if not given.exists() else "not an evaluation set"
            raise ElmoError(f"{given}: {what}; give an evaluation set's NAME{DATA_SUFFIX} (with "
                            f"NAME{KEY_SUFFIX} beside it) or a directory holding such files")
        for file in files:
            name = file.name.removesuffix(DATA_SUFFIX)
            sets[name] = EvalSet(name, file, file.with_name(name + KEY_SUFFIX))

    def order(s: EvalSet) -> tuple[int, str]:
        known = FRAMEWORK_ORDER.index(s.name) if s.name in FRAMEWORK_ORDER else len(FRAMEWORK_ORDER)
        return known, s.name

    return sorted(sets.values(), key=order)
