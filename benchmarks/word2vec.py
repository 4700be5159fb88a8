"""Static word vectors trained on the biLM's own training text: the same-corpus baseline of the
full-scale +ELMo table (`tasks.py --full`, column "alone + word2vec").

The paper's task baselines start from GloVe; a fair static counterpart of a biLM trained on a
small corpus is word2vec on that same corpus. `default` was trained on WikiText-2 train
(white-space tokens), `default-zh` on the zh-raw-text training split (characters, as
`pretrain.zh_corpus` writes it). Skip-gram with negative sampling (gensim), 100 dimensions (the
task models' default word embedding size), seed 0, written in the word2vec text format with its
header: a product of the benchmark, not shipped.

    python benchmarks/word2vec.py --corpus default --out runs/word2vec/default.vec
    python benchmarks/word2vec.py --corpus default-zh --out runs/word2vec/default-zh.vec

Takes about 3 minutes for WikiText-2 (2 M tokens, 10 epochs) on this machine with one worker
thread (20 s an epoch, measured while the machine was shared), less with 2.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from common import DATA, open_text

from elmo.extras import import_extra
from elmo.tokenize import get_tokenizer

CORPORA = {"default": "WikiText-2 train (white-space tokens)",
           "default-zh": "zh-raw-text training split (characters)"}


class Sentences:
    """A restartable iterable of token lists (gensim reads it once per epoch)."""

    def __init__(self, path: Path, tokenizer: str) -> None:
        self.path, self.tokenize = path, get_tokenizer(tokenizer)

    def __iter__(self) -> Iterator[list[str]]:
        with open_text(self.path) as f:
            for line in f:
                if tokens := self.tokenize(line):
                    yield tokens


def corpus_file(corpus: str, work: Path) -> tuple[Path, str]:
    """The training text of `corpus` (a name of CORPORA or a file) and its tokenizer."""
    if corpus == "default":
        return DATA / "wikitext-2" / "train.txt.gz", "whitespace"
    if corpus == "default-zh":
        from pretrain import zh_corpus

        zh_corpus(DATA / "zh-raw-text", work / "zh-data")
        return work / "zh-data" / "train.txt", "chars"
    return Path(corpus), "whitespace"


def train_word2vec(corpus: str, out: Path, dim: int = 100, epochs: int = 10,
                   min_count: int = 2, workers: int = 2, tokenizer: str | None = None
                   ) -> dict:
    """Train skip-gram vectors on `corpus` and write them to `out` (text format, header);
    returns what was done. Nothing happens when `out` exists (delete it to retrain)."""
    gensim_models = import_extra("gensim.models", "benchmarks/word2vec.py")
    info_path = out.with_suffix(out.suffix + ".json")
    if out.exists() and info_path.exists():
        return json.loads(info_path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="elmo-word2vec-") as tmp:
        path, default_tokenizer = corpus_file(corpus, Path(tmp))
        sentences = Sentences(path, tokenizer or default_tokenizer)
        start = time.perf_counter()
        model = gensim_models.Word2Vec(sentences, vector_size=dim, window=5, min_count=min_count,
                                       sg=1, negative=5, epochs=epochs, workers=workers, seed=0)
        seconds = time.perf_counter() - start
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    model.wv.save_word2vec_format(str(partial))
    partial.replace(out)
    info = {"corpus": CORPORA.get(corpus, corpus), "file": str(path), "words": len(model.wv),
            "dim": dim, "epochs": epochs, "min_count": min_count, "window": 5,
            "algorithm": "skip-gram, negative sampling 5", "seed": 0, "workers": workers,
            "seconds": round(seconds, 1), "vectors": str(out)}
    info_path.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--corpus", default="default",
                        help=f"{' or '.join(CORPORA)} (the biLM's training text), or a text file")
    parser.add_argument("--out", type=Path, required=True, help="the vectors (.vec, text)")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tokenizer", help="default: chars for default-zh, else whitespace")
    args = parser.parse_args()
    info = train_word2vec(args.corpus, args.out, args.dim, args.epochs, args.min_count,
                          args.workers, args.tokenizer)
    print(json.dumps(info, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
