"""Task helpers: small generated data sets of each task type (and a CoNLL-U file), and the
arguments of a short `elmo task train` on them; a train function that only sleeps."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

PEOPLE, PLACES, WORDS = ["anna", "bob", "carl"], ["paris", "rome"], ["saw", "in", "met", "the"]


def tagging_file(path, n: int, seed: int) -> None:
    """CoNLL (IOB1): people I-PER, places I-LOC, other words O."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- O", ""]
    for _ in range(n):
        for _ in range(rng.randint(2, 5)):
            word = rng.choice(PEOPLE + PLACES + WORDS)
            tag = "I-PER" if word in PEOPLE else "I-LOC" if word in PLACES else "O"
            lines.append(f"{word} X {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def classification_file(path, n: int, seed: int) -> None:
    """label-text: pos iff the sentence says good."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        words = rng.choices(WORDS, k=3) + ["good" if label == "pos" else "bad"]
        rng.shuffle(words)
        lines.append(f"{label} {' '.join(words)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def pair_file(path, n: int, seed: int) -> None:
    """tsv: same iff both sentences name the same person."""
    rng = random.Random(seed)
    lines = ["id\tA\tB\tlabel"]
    for i in range(n):
        a, b = rng.choice(PEOPLE), rng.choice(PEOPLE)
        lines.append(f"{i}\t{a} saw me\tthe {b} met\t{'same' if a == b else 'other'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def task_args(kind: str, tmp_path, elmo: str, out: str = "run", epochs: int = 4) -> list[str]:
    """`elmo task train` arguments for a short `kind` run over `elmo`, its train, dev and test
    sets written into `tmp_path`."""
    makers = {"tagging": tagging_file, "classification": classification_file, "pair": pair_file}
    for split, n, seed in (("train", 40, 0), ("dev", 12, 1), ("test", 12, 2)):
        makers[kind](tmp_path / split, n, seed)
    fmt = {"tagging": ["--format", "conll", "--scheme", "iob1"],
           "classification": ["--format", "label-text"],
           "pair": ["--format", "tsv", "--text-columns", "A,B", "--label-column", "label"]}
    return ["task", "train", "--task", kind, "--train", str(tmp_path / "train"), "--dev",
            str(tmp_path / "dev"), "--test", str(tmp_path / "test"), *fmt[kind], "--elmo", elmo,
            "--out", str(tmp_path / out), "--epochs", str(epochs), "--hidden-dim", "16",
            "--embedding-dim", "16", "--batch-size", "8", "--lr", "0.01",
            "--cache-dir", str(tmp_path / "cache"), "--quiet"]


CONLLU = """# sent_id = 1
1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_

1\ta\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarked\tbark\tVERB\tVBD\t_\t0\troot\t_\t_
"""


def pid_then_sleep(config) -> dict:
    """A train function for worker processes: writes its pid to `config.out` + ".pid", then
    sleeps two minutes (a long run)."""
    Path(config.out + ".pid").write_text(str(os.getpid()))
    time.sleep(120)
    return {}
