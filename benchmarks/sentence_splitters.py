"""Sentence splitters for paragraphs (JSON lines, WikiExtractor): quality and speed, one run.

Quality: the paragraphs of UD English EWT's test set (../shared/data/ud-english-ewt; web text:
blogs, reviews, e-mail, answers), their sentences joined by a space, split again; precision,
recall and F1 of the sentence boundaries (character offsets, whitespace ignored) against the
treebank's sentences. Speed: seconds to split the EWT paragraphs and, with `--wiki DIR`, the
first `--paragraphs` paragraphs (lines of 200 characters or more) of a WikiExtractor folder,
each splitter in turn, the best of `--repeats`. Chinese: how often each splitter leaves a 。！？
unsplit inside a sentence, on the paragraphs of SIGHAN 2005's PKU test file
(../shared/data/zh-raw-text), the gold segmentation's spaces removed (none of them the rule's
own count, which splits at every one).

Candidates, each skipped if not installed: sentencex (the project's), spaCy's rule-based
sentencizer, pysbd, syntok, blingfire.

    python benchmarks/sentence_splitters.py [--wiki DIR] [--paragraphs 5000] [--repeats 3]

Prints a table and writes benchmarks/results/sentence_splitters.json.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import DATA, results_file, write_json

from elmo.data.corpus import expand_paths
from elmo.io.inputs import input_kind
from elmo.io.sentences import SPLITTERS

Splitter = Callable[[str], list[str]]


def candidates() -> dict[str, Splitter]:
    """The splitters that are installed, by name."""
    found: dict[str, Splitter] = {"sentencex": SPLITTERS["en"].split}

    def maybe(name: str, build: Callable[[], Splitter]) -> None:
        try:
            found[name] = build()
        except ImportError:
            print(f"({name} is not installed: left out)")

    def spacy() -> Splitter:
        nlp = importlib.import_module("spacy").blank("en")
        nlp.add_pipe("sentencizer")
        return lambda text: [s.text for s in nlp(text).sents]

    def pysbd() -> Splitter:
        return importlib.import_module("pysbd").Segmenter(language="en", clean=False).segment

    def syntok() -> Splitter:
        segmenter = importlib.import_module("syntok.segmenter")
        return lambda text: ["".join(t.spacing + t.value for t in sentence)
                             for paragraph in segmenter.process(text) for sentence in paragraph]

    def blingfire() -> Splitter:
        module = importlib.import_module("blingfire")
        return lambda text: module.text_to_sentences(text).split("\n")

    for name, build in (("spacy-sentencizer", spacy), ("pysbd", pysbd), ("syntok", syntok),
                        ("blingfire", blingfire)):
        maybe(name, build)
    return found


def ewt_paragraphs(path: Path) -> list[list[str]]:
    """The sentences (`# text`) of each paragraph (`# newpar`, `# newdoc`) of a CoNLL-U file."""
    paragraphs, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(("# newpar", "# newdoc")) and current:
            paragraphs.append(current)
            current = []
        elif line.startswith("# text = "):
            current.append(line.removeprefix("# text = "))
    return [*paragraphs, current] if current else paragraphs


def boundaries(sentences: list[str]) -> set[int]:
    """Where each sentence but the last ends, counted in non-space characters."""
    ends, n = set(), 0
    for sentence in sentences[:-1]:
        n += len(re.sub(r"\s", "", sentence))
        ends.add(n)
    return ends


def wiki_paragraphs(folder: Path, n: int) -> list[str]:
    found = []
    for path in expand_paths([folder]):
        for passage in input_kind(path).read(path):
            if len(passage.text) >= 200:
                found.append(passage.text)
                if len(found) == n:
                    return found
    return found


def seconds(split: Splitter, texts: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for text in texts:
            split(text)
        best = min(best, time.perf_counter() - start)
    return best


def chinese_misses(split: Splitter, paragraphs: list[str]) -> int:
    """Sentence-final marks left inside a sentence (a sentence-final mark, its closing quotes,
    then more text)."""
    return sum(len(re.findall(r"[。！？][”’」』）)]*(?=\S)", s.strip()))
               for p in paragraphs for s in split(p))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki", type=Path, help="a WikiExtractor folder for the speed test")
    parser.add_argument("--paragraphs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gold = ewt_paragraphs(DATA / "ud-english-ewt" / "en_ewt-ud-test.conllu")
    texts = [" ".join(p) for p in gold]
    wiki = wiki_paragraphs(args.wiki, args.paragraphs) if args.wiki else []
    pku = DATA / "zh-raw-text" / "sighan2005_pku_test_gold.utf8"
    chinese = [p for p in (line.replace(" ", "") for line in
                           pku.read_text(encoding="utf-8").splitlines()) if p]
    rows: dict[str, dict[str, Any]] = {}
    for name, split in candidates().items():
        tp = fp = fn = 0
        for sentences, text in zip(gold, texts, strict=True):
            got, want = boundaries([s for s in split(text) if s.strip()]), boundaries(sentences)
            tp, fp, fn = tp + len(got & want), fp + len(got - want), fn + len(want - got)
        precision, recall = tp / (tp + fp), tp / (tp + fn)
        rows[name] = {"precision": precision, "recall": recall,
                      "f1": 2 * precision * recall / (precision + recall),
                      "ewt_seconds": seconds(split, texts, args.repeats),
                      "wiki_seconds": seconds(split, wiki, args.repeats) if wiki else None,
                      "chinese_unsplit": chinese_misses(split, chinese)}
    rule = SPLITTERS["zh"].split
    fastest = min(r["wiki_seconds"] or r["ewt_seconds"] for r in rows.values())
    print(f"EWT test: {len(gold)} paragraphs, {sum(map(len, gold))} sentences; "
          f"wiki: {len(wiki)} paragraphs, {sum(map(len, wiki)):,} characters; "
          f"PKU: {len(chinese)} paragraphs, the rule splits them into "
          f"{sum(len(rule(p)) for p in chinese)} sentences")
    print(f"{'splitter':18s} {'P':>6s} {'R':>6s} {'F1':>6s} {'EWT s':>7s} {'wiki s':>7s} "
          f"{'x fastest':>9s} {'zh unsplit':>10s}")
    for name, r in rows.items():
        time_of = r["wiki_seconds"] or r["ewt_seconds"]
        wiki_s = f"{r['wiki_seconds']:.3f}" if r["wiki_seconds"] is not None else "-"
        print(f"{name:18s} {r['precision']:6.3f} {r['recall']:6.3f} {r['f1']:6.3f} "
              f"{r['ewt_seconds']:7.3f} {wiki_s:>7s} {time_of / fastest:9.1f} "
              f"{r['chinese_unsplit']:10d}")
    versions = {}
    for package in ("sentencex", "spacy", "pysbd", "syntok", "blingfire"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    write_json(results_file("sentence_splitters.json", quick=False), {
        "machine": platform.platform(), "python": platform.python_version(),
        "versions": versions, "ewt_paragraphs": len(gold), "wiki_paragraphs": len(wiki),
        "chinese_paragraphs": len(chinese), "splitters": rows})


if __name__ == "__main__":
    main()
