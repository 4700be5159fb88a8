"""CMRC 2018's official evaluation (`--metric cmrc`), as its `cmrc2018_evaluate.py` (v6)
computes it.

An answer is lower-cased and stripped, then segmented: every Chinese character (U+4E00 to
U+9FA5) is a segment, and each run of other characters is split into words by NLTK's word
tokenizer (English words, numbers such as 3.5 and 1,000, punctuation). The script's list of
punctuation (`PUNCTUATION`) is dropped first: a dropped character joins the text around it.
F1 is over the longest common *contiguous* run of segments of the prediction and a reference
(not over a bag of tokens, as SQuAD's); exact match compares the texts with that punctuation
removed. Each is the maximum over the question's reference answers.

One difference: the script splits a run into sentences (NLTK's punkt, a data download) before
its words; this does not, which matters only where a run of non-Chinese text holds a sentence
end inside it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from elmo.extras import import_extra
from elmo.tasks.squad import scores_over_answers

# the script's list: ASCII - : _ * ^ / \ ~ ` + = and Chinese punctuation ('……' in it, two
# characters, never matches one and is not here)
PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")
CHINESE = re.compile("[\u4e00-\u9fa5]")


def remove_punctuation(text: str) -> str:
    """`text` lower-cased, stripped, without the characters of `PUNCTUATION`."""
    return "".join(ch for ch in text.lower().strip() if ch not in PUNCTUATION)


def _words(run: str) -> list[str]:
    """NLTK's words of a run of non-Chinese text (no import for white space alone)."""
    if not run.strip():
        return []
    return import_extra("nltk.tokenize", "CMRC 2018's metric").NLTKWordTokenizer().tokenize(run)


def segments(text: str) -> list[str]:
    """The script's mixed segmentation of `text`, punctuation removed: Chinese characters one
    by one, the runs between them in words."""
    out: list[str] = []
    run: list[str] = []
    for ch in text.lower().strip():
        if ch in PUNCTUATION:
            continue
        if CHINESE.match(ch):
            out += _words("".join(run)) + [ch]
            run = []
        else:
            run.append(ch)
    return out + _words("".join(run))


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """The length of the longest run of consecutive items that `a` and `b` share."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] + [previous[j] + 1 if x == y else 0 for j, y in enumerate(b)]
        best, previous = max(best, *current), current
    return best


def cmrc_f1(prediction: str, answer: str) -> float:
    """F1 in 0..1 of the longest common run of segments (0.0 when there is none)."""
    predicted, wanted = segments(prediction), segments(answer)
    common = longest_common_run(wanted, predicted)
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def cmrc_exact_match(prediction: str, answer: str) -> float:
    """1.0 if the texts are equal once punctuation is removed, else 0.0."""
    return float(remove_punctuation(prediction) == remove_punctuation(answer))


def cmrc_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """CMRC 2018's F1 and exact match in 0..100: per question the maximum over its reference
    answers, then the mean over questions. A question without references (SQuAD 2.0's
    unanswerable) scores 1 when the prediction is empty once punctuation is removed."""
    return scores_over_answers(predictions, golds, cmrc_exact_match, cmrc_f1,
                               lambda p: float(not remove_punctuation(p)), "CMRC")
