"""How long a run of characters a document must share with a test set to be left out
(`elmo prepare-corpus --exclude-overlap`, 25 Chinese characters): for each length, the
documents of a Chinese corpus that share a run that long with the test files.

The corpus of docs/training.md's Chinese recipe, a part of it: the news transcripts of
china-data/xwlb for the years given (`--years`, its JSON files) and the laws of
LawRefBook/Laws outside its DLC/ folder (local regulations); the test files: SIGHAN 2005's PKU
and MSR gold files, MSRA NER's test set and CMRC 2018's trial set (../shared/data), read as
`--exclude-overlap` reads them (`elmo.tasks.test_text.read_test_texts`).

    python benchmarks/overlap_length.py --xwlb xwlb --laws Laws [--years 2012 2024]
        [--lengths 13 20 25 30 40]

Prints a table and writes benchmarks/results/training/zh-overlap-length.json.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections import Counter
from itertools import groupby
from operator import attrgetter
from pathlib import Path

from common import DATA, RESULTS, cpu_info, write_json

from elmo.data.corpus import expand_paths
from elmo.io.inputs import input_kind
from elmo.tasks.test_text import read_test_texts

TEST_FILES = ("zh-raw-text/sighan2005_pku_test_gold.utf8",
              "zh-raw-text/sighan2005_msr_test_gold.utf8", "msra-ner/msra_test_bio",
              "cmrc2018/cmrc2018_trial.json")


def documents(paths: list[Path]) -> list[str]:
    """Each document's text, its paragraphs joined by line breaks."""
    found = []
    for path in paths:
        passages = input_kind(path).read(path)
        found += ["\n".join(p.text for p in doc) for _, doc in
                  groupby(passages, attrgetter("key"))]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--xwlb", type=Path, required=True, help="a clone of china-data/xwlb")
    parser.add_argument("--laws", type=Path, required=True, help="a clone of LawRefBook/Laws")
    parser.add_argument("--years", nargs="+", default=["2012", "2024"])
    parser.add_argument("--lengths", nargs="+", type=int, default=[13, 20, 25, 30, 40])
    args = parser.parse_args()
    tests = [DATA / name for name in TEST_FILES]
    corpus = {"news items": documents([p for year in args.years for p in
                                       expand_paths([f"{args.xwlb}/assets/{year}/*.json"])]),
              "laws": documents([p for p in expand_paths([f"{args.laws}/*/**/*.md"])
                                 if "DLC" not in p.relative_to(args.laws).parts])}
    rows = []
    for n in args.lengths:
        overlap = read_test_texts(tests, characters=True, n=n)  # as --exclude-overlap reads them
        left_out = Counter(source for source, docs in corpus.items() for doc in docs
                           if overlap.source_of([doc]) is not None)
        rows.append([n, left_out["news items"], left_out["laws"]])
        print(f"{n:3d} characters: {left_out['news items']:6,} news items, "
              f"{left_out['laws']:5,} laws left out", flush=True)
    sizes = {source: len(docs) for source, docs in corpus.items()}
    write_json(RESULTS / "training" / "zh-overlap-length.json", {
        "title": "Documents left out for sharing a run of N characters with the Chinese test "
                 f"sets: xwlb's news of {' and '.join(args.years)} "
                 f"({sizes['news items']:,} items), Laws outside DLC/ ({sizes['laws']:,} laws)",
        "command": "python benchmarks/overlap_length.py --xwlb xwlb --laws Laws",
        "host": f"{os.cpu_count()}-core {cpu_info()['cpu']}",
        "versions": {"python": platform.python_version()},
        "measured": datetime.date.today().isoformat(),
        "columns": ["a run of", f"news items left out (of {sizes['news items']:,})",
                    f"laws left out (of {sizes['laws']:,})"],
        "formats": [None, ",d", ",d"],
        "rows": [[f"{n} characters", items, laws] for n, items, laws in rows]})


if __name__ == "__main__":
    main()
