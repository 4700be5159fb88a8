"""`python -m elmo.demo`: embed a small file with the shipped model, then show ELMo at work.

The same word in different senses gets one static vector (layer 0, the char-CNN) but
different contextual vectors (the LSTM layers): occurrences of a word cluster by sense.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import h5py
import numpy as np

from elmo.embedding import Embedder

# (word, sense, sentence): two senses each, written for this demo.
SENSES = [
    ("bank", "river", "The boat drifted toward the muddy bank of the river ."),
    ("bank", "river", "Trees grew along the east bank of the stream ."),
    ("bank", "river", "They walked along the river bank at dawn ."),
    ("bank", "money", "She borrowed money from the bank to buy a house ."),
    ("bank", "money", "The bank raised its interest rates last year ."),
    ("bank", "money", "He works as a manager at a large bank in London ."),
    ("play", "theatre", "The play was first performed in London in 1605 ."),
    ("play", "theatre", "Critics praised the new play and its actors ."),
    ("play", "theatre", "He wrote a play about the life of a king ."),
    ("play", "sport", "The children went outside to play in the park ."),
    ("play", "sport", "He will play for the national team next season ."),
    ("play", "sport", "They play football every Saturday afternoon ."),
]


def nearest_neighbour_accuracy(vectors: np.ndarray, senses: list[str]) -> float:
    """Share of occurrences whose most similar other occurrence has the same sense.

    Tied neighbours (identical vectors) count by the share of them with the same sense, so
    identical vectors score exactly chance.
    """
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    right = 0.0
    for i, row in enumerate(sims):
        best = np.flatnonzero(np.isclose(row, row.max(), atol=1e-6))
        right += np.mean([senses[j] == senses[i] for j in best])
    return right / len(senses)


def conclusion(word: str, scores: list[float], chance: float, n: int) -> str:
    """What the scores of `word`'s `n` occurrences (layer 0 first) show: the contextual
    layers that tell its senses apart (above chance by more than one occurrence's share,
    1/n), or that none does here."""
    apart = [k for k in range(1, len(scores)) if scores[k] > chance + 1 / n + 1e-9]
    if not apart:
        best = max(range(1, len(scores)), key=lambda k: scores[k])
        return (f"{word}: no layer tells its senses apart in these sentences (at best "
                f"{scores[best]:.2f}, layer {best}; chance {chance:.2f}, one occurrence "
                f"{1 / n:.2f})")
    layers = " and ".join(map(str, apart))
    return (f"{word}: layer{'s' * (len(apart) > 1)} {layers} tell{'s' * (len(apart) == 1)} "
            f"its senses apart ({', '.join(f'{scores[k]:.2f}' for k in apart)}; chance "
            f"{chance:.2f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model name or directory (default: shipped)")
    args = parser.parse_args(argv)
    embedder = Embedder.from_pretrained(args.model)

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "sentences.txt", Path(tmp) / "sentences.hdf5"
        src.write_text("\n".join(s for _, _, s in SENSES) + "\n", encoding="utf-8")
        embedder.embed_file(src, out, progress=False)  # the same as `elmo embed default ...`
        with h5py.File(out, "r") as f:
            layers = [f[str(i)][...] for i in range(len(SENSES))]
    n_layers, _, width = layers[0].shape
    print(f"Embedded {len(SENSES)} sentences: each line -> ({n_layers} layers, n tokens, "
          f"{width}) float32, as `elmo embed` writes them.\n")

    print("Nearest-neighbour sense agreement: the share of occurrences whose closest other "
          "occurrence\n(cosine) has the same sense. 1.0 is perfect; identical vectors score "
          "chance.")
    print(f"{'word':6} {'chance':>7} {'static (layer 0)':>17} " +
          " ".join(f"{'layer ' + str(k):>8}" for k in range(1, n_layers)))
    verdicts = []
    for word in dict.fromkeys(w for w, _, _ in SENSES):
        rows = [i for i, (w, _, _) in enumerate(SENSES) if w == word]
        senses = [SENSES[i][1] for i in rows]
        positions = [SENSES[i][2].split().index(word) for i in rows]
        scores = [
            nearest_neighbour_accuracy(np.stack([layers[i][k, p] for i, p in
                                                 zip(rows, positions, strict=True)]), senses)
            for k in range(n_layers)
        ]
        chance = (len(rows) / len(set(senses)) - 1) / (len(rows) - 1)
        print(f"{word:6} {chance:7.2f} {scores[0]:17.2f} " +
              " ".join(f"{s:8.2f}" for s in scores[1:]))
        verdicts.append(conclusion(word, scores, chance, len(rows)))
    print("\nA static vector is the same in every sentence, so it cannot tell the senses apart."
          "\nThe contextual layers, word by word:\n  " + "\n  ".join(verdicts) +
          "\nTry it on your own text:\n  elmo embed default input.txt output.hdf5")


if __name__ == "__main__":
    main()
