from __future__ import annotations

import numpy as np

from elmo import save_pretrained
from elmo.demo import main, nearest_neighbour_accuracy
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
