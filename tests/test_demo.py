from __future__ import annotations

import numpy as np

from elmo import save_pretrained
from elmo.demo import conclusion, main, nearest_neighbour_accuracy
from tests.conftest import random_bilm


def test_nearest_neighbour_accuracy_scores_ties_as_chance_and_clusters_as_one():
    senses = ["a", "a", "a", "b", "b", "b"]
    assert abs(nearest_neighbour_accuracy(np.ones((6, 4)), senses) - 0.4) < 1e-12
    clustered = np.array([[1, 0.1], [1, 0.2], [1, 0.0], [0.1, 1], [0.2, 1], [0, 1]])
    assert nearest_neighbour_accuracy(clustered, senses) == 1.0


def test_demo_runs_on_a_given_model(tmp_path, capsys):
    save_pretrained(random_bilm(), tmp_path / "m")
    main(["--model", str(tmp_path / "m")])
    out = capsys.readouterr().out
    assert "Embedded 12 sentences" in out and "bank" in out and "play" in out


def test_the_conclusion_says_what_each_words_scores_show():
    """Six occurrences, chance 0.40: a layer tells the senses apart only above chance by
    more than one occurrence (0.17); bank's 0.50 and 0.33 do not."""
    assert conclusion("play", [0.4, 1.0, 1.0], 0.4, 6) == (
        "play: layers 1 and 2 tell its senses apart (1.00, 1.00; chance 0.40)")
    assert conclusion("bank", [0.4, 0.5, 1 / 3], 0.4, 6) == (
        "bank: no layer tells its senses apart in these sentences (at best 0.50, layer 1; "
        "chance 0.40, one occurrence 0.17)")
    assert conclusion("bank", [0.4, 0.4, 2 / 3], 0.4, 6) == (
        "bank: layer 2 tells its senses apart (0.67; chance 0.40)")

