"""The coreference metrics against the reference scorer's own test cases (scorer.pl v8.01,
conll/reference-coreference-scorers, test/CorefMetricTestConfig.pm and TestCases.README).

Each case is written as in TestCases.README: a cluster is a string of one-letter mentions,
clusters separated by spaces. A letter repeated is the same mention repeated (TC-A-7..9);
B is a mention other than b (TC-A-5, 6: it overlaps b). The expected (recall, precision, F1)
are the config's, rounded there to five digits where they are not fractions.
"""

import pytest

from elmo.tasks.coref_metrics import coref_scores, coref_tallies

KEY_A = "a bc def"
F = 2 * (5 / 9) * (17 / 42) / ((5 / 9) + (17 / 42))  # TC-A-4, 7, 8, 9's B-cubed F1

CASES = [  # id, key, response, {metric: (recall, precision, F1)}
    ("A1", KEY_A, "a bc def", {"muc": (1, 1, 1), "bcub": (1, 1, 1), "ceafe": (1, 1, 1)}),
    ("A2", KEY_A, "a de", {"muc": (1 / 3, 1, 0.5), "bcub": ((7 / 3) / 6, 1, 14 / 25),
                           "ceafe": (0.6, 0.9, 0.72)}),
    ("A3", KEY_A, "a bcx defy z", {"muc": (1, 3 / 5, 0.75),
                                   "bcub": (1, (4 + 7 / 12) / 9, 110 / 163),
                                   "ceafe": (0.88571, 0.66429, 0.75918)}),
    ("A4", KEY_A, "a bcx dy z", {"muc": (1 / 3, 1 / 3, 1 / 3),
                                 "bcub": ((3 + 1 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 7, F),
                                 "ceafe": (0.73333, 0.55, 0.62857)}),
    ("A5", KEY_A, "a bcxB dy z", {"muc": (1 / 3, 1 / 4, 2 / 7),
                                  "bcub": ((3 + 1 / 3) / 6, 2.5 / 8,
                                           2 * (5 / 9) * (5 / 16) / ((5 / 9) + (5 / 16))),
                                  "ceafe": (0.68889, 0.51667, 0.59048)}),
    ("A6", KEY_A, "a bcx dy Bz", {"muc": (1 / 3, 1 / 4, 2 / 7),
                                  "bcub": ((10 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 8,
                                           2 * (5 / 9) * (17 / 48) / ((5 / 9) + (17 / 48))),
                                  "ceafe": (0.73333, 0.55, 0.62857)}),
    ("A7", KEY_A, "a bbcx dy z", {"muc": (1 / 3, 1 / 3, 1 / 3),
                                  "bcub": ((10 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 7, F),
                                  "ceafe": (0.73333, 0.55, 0.62857)}),
    ("A8", KEY_A, "a bcx dy bz", {"muc": (1 / 3, 1 / 3, 1 / 3),
                                  "bcub": ((10 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 7, F),
                                  "ceafe": (0.73333, 0.55, 0.62857)}),
    ("A9", KEY_A, "a bcx dy bbbbbbbbbbz", {"muc": (1 / 3, 1 / 3, 1 / 3),
                                           "bcub": ((10 / 3) / 6, (1 + 4 / 3 + 1 / 2) / 7, F),
                                           "ceafe": (0.73333, 0.55, 0.62857)}),
    ("A10", KEY_A, "a b c d e f", {"muc": (0, 0, 0), "bcub": (3 / 6, 1, 2 / 3)}),
    ("A11", KEY_A, "abcdef", {"muc": (1, 3 / 5, 6 / 8),
                              "bcub": (1, (1 / 6 + 2 * 2 / 6 + 3 * 3 / 6) / 6, 14 / 25)}),
    ("A12", KEY_A, "a x y c d e z", {"muc": (0, 0, 0),
                                     "bcub": ((1 + 1 / 2 + 2 / 3) / 6, 4 / 7,
                                              2 * (13 / 36) * (4 / 7) / (13 / 36 + 4 / 7))}),
    ("A13", KEY_A, "aBxcdeF", {"muc": (1 / 3, 1 / 6, 2 / 9),
                               "bcub": ((1 + 1 / 2 + 2 * 2 / 3) / 6,
                                        (1 / 7 + 1 / 7 + 2 * 2 / 7) / 7,
                                        2 * (17 / 36) * (6 / 49) / ((17 / 36) + (6 / 49)))}),
    ("D1", "12345 67 89ABC", "12345 6789ABC", {"muc": (1, 9 / 10, 2 * (9 / 10) / (1 + 9 / 10)),
                                                "bcub": (1, 16 / 21,
                                                         2 * (16 / 21) / (1 + 16 / 21))}),
    ("E1", "12345 67 89ABC", "1234589ABC 67", {"muc": (1, 9 / 10,
                                                        2 * (9 / 10) / (1 + 9 / 10)),
                                                "bcub": (1, 7 / 12, 2 * (7 / 12) / (1 + 7 / 12))}),
    ("F1", "ABCD", "AB CD", {"muc": (2 / 3, 1, 2 * (2 / 3) / (2 / 3 + 1))}),
    ("G1", "AB CD", "ABCD", {"muc": (1, 2 / 3, 2 * (2 / 3) / (1 + 2 / 3))}),
    ("K1", "BCDEGHJ", "ABC DEF GHI", {"muc": (3 / 6, 3 / 6, 3 / 6)}),
    ("L1", "ABC DEFG", "AB CD FGH", {"muc": (2 / 5, 2 / 4,
                                             2 * (2 / 5) * (2 / 4) / (2 / 5 + 2 / 4))}),
    ("M1", "abcdef", "abcdef", {"muc": (1, 1, 1), "bcub": (1, 1, 1), "ceafe": (1, 1, 1)}),
    ("N1", "a b c d e f", "a b c d e f", {"muc": (0, 0, 0), "bcub": (1, 1, 1),
                                          "ceafe": (1, 1, 1)}),
]


def clusters(text: str) -> list[list[str]]:
    return [list(cluster) for cluster in text.split()]


@pytest.mark.parametrize(("key", "response", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_the_reference_scorers_test_cases(key, response, expected):
    tallies = coref_tallies([(clusters(key), clusters(response))])
    for metric, figures in expected.items():
        tally = tallies[metric]
        assert (tally.recall, tally.precision, tally.f1) == pytest.approx(figures, abs=1e-5), \
            metric


def test_documents_add_numerators_and_denominators_not_scores():
    """The scorer sums each metric's numerators and denominators over documents (A2's MUC
    recall is 1/3, A3's 3/3: together 4/6, not their mean)."""
    tallies = coref_tallies([(clusters(KEY_A), clusters("a de")),
                             (clusters(KEY_A), clusters("a bcx defy z"))])
    assert tallies["muc"].recall == pytest.approx(4 / 6)
    assert tallies["muc"].precision == pytest.approx(4 / 6)
    assert tallies["ceafe"].recall == pytest.approx((1.8 + 1 + 0.8 + 6 / 7) / 6)


def test_the_conll_score_is_the_mean_of_the_three_f1s():
    scores = coref_scores([(clusters(KEY_A), clusters("a de"))])
    assert scores["muc"] == pytest.approx(50.0)
    assert scores["bcub"] == pytest.approx(56.0)
    assert scores["ceafe"] == pytest.approx(72.0)
    assert scores["score"] == pytest.approx((50 + 56 + 72) / 3)


def test_nothing_predicted_scores_zero():
    assert coref_scores([(clusters(KEY_A), [])])["score"] == 0.0
    assert coref_scores([([], [])])["score"] == 0.0
