"""Task examples as batches: layouts, feature-cache numbering, vocabularies, splits."""

from __future__ import annotations

import pytest

from elmo.tasks.data import (
    Encoded,
    build_labels,
    build_vocab,
    held_out_split,
    nested_sample,
    sentence_layout,
    unseen_targets,
    warn_unseen,
)
from elmo.tasks.encoder import PAD, UNK
from elmo.tasks.readers import LabeledPair, TaggedSentence
from elmo.tasks.registry import TASKS
from elmo.tasks.squad import Passage, SquadQuestion
from elmo.tasks.task_type import LabelTask
from tests.conftest import random_bilm

LABEL_TASKS = {kind.example: kind for kind in TASKS.values() if isinstance(kind, LabelTask)}


def label_targets(examples, labels):
    """Each example's target, as the label task that reads its kind of example makes it."""
    index = {label: i for i, label in enumerate(labels)}
    return [LABEL_TASKS[type(e)].target(e, index) for e in examples]


def test_pair_batch_is_first_sentences_then_second_with_cache_numbering():
    others = [LabeledPair([f"w{i}"], [f"v{i}"], "x") for i in range(10)]
    pairs = [LabeledPair(["a", "b"], ["c"], "x"), LabeledPair(["d"], ["e", "f", "g"], "y"),
             LabeledPair(["a"], ["a"], "x")]
    vocab, labels = build_vocab(pairs[:2]), build_labels(pairs)
    assert vocab[:2] == ["<pad>", "<unk>"] and labels == ["x", "y"]
    # these 3 pairs sit at positions 4, 7, 9 of the file the cache was built from
    file = others[:4] + pairs[:1] + others[4:6] + pairs[1:2] + others[6:7] + pairs[2:]
    encoded = Encoded(file, vocab, label_targets(file, labels), subset=[4, 7, 9])
    batch = encoded.batch([1, 2])
    assert batch.tokens == [["d"], ["a"], ["e", "f", "g"], ["a"]]
    assert batch.sentence_ids == [14, 18, 15, 19]  # pair p's sentences: 2p and 2p + 1
    assert batch.mask.tolist() == [[True, False, False], [True, False, False],
                                   [True, True, True], [True, False, False]]
    index = {w: i for i, w in enumerate(vocab)}
    assert batch.word_ids[2].tolist() == [index["e"], index["f"], index["g"]]
    assert batch.word_ids[0].tolist() == [index["d"], PAD, PAD]
    assert batch.targets.tolist() == [1, 0]
    assert batch.char_ids(random_bilm()).shape == (4, 3, 50)


def test_a_shared_sentence_is_cached_once():
    passage = ["a", "long", "passage"]
    questions = [SquadQuestion(str(i), [f"q{i}"], Passage("", passage, []), [], [])
                 for i in range(3)]
    other = SquadQuestion("3", ["q3"], Passage("", ["a", "long", "passage"], []), [], [])
    sentences, numbers = sentence_layout([*questions, other])
    assert sentences == [passage, ["q0"], ["q1"], ["q2"], passage, ["q3"]]  # equal, not shared
    assert numbers == [[0, 1], [0, 2], [0, 3], [4, 5]]
    encoded = Encoded([*questions, other], build_vocab(questions))
    assert encoded.batch([2, 1]).sentence_ids == [0, 0, 3, 2] and encoded.batch([1]).targets \
        is None


def test_tagging_batch_targets_and_unknown_words():
    sentences = [TaggedSentence(["a", "b"], ["B-X", "O"]), TaggedSentence(["zz"], ["O"])]
    encoded = Encoded(sentences, ["<pad>", "<unk>", "a", "b"],
                      label_targets(sentences, ["B-X", "O"]))
    batch = encoded.batch([0, 1])
    assert batch.word_ids.tolist() == [[2, 3], [UNK, PAD]]
    assert batch.targets.tolist() == [[0, 1], [1, 0]]
    assert batches_cover(encoded.batches(1, shuffle_seed=3), 2)
    assert encoded.batches(2) == [[1, 0]]  # evaluation: sorted by length


def batches_cover(batches, n):
    return sorted(i for b in batches for i in b) == list(range(n))


def test_splits_are_fixed_and_disjoint():
    kept, held = held_out_split(50, 0.2)
    assert len(held) == 10 and not set(kept) & set(held) and len(kept) + len(held) == 50
    assert held_out_split(50, 0.2) == (kept, held)
    with pytest.raises(ValueError, match="dev-fraction"):
        held_out_split(50, 1.0)
    with pytest.raises(ValueError, match="train-fraction"):
        nested_sample(10, 0.0, 0)


def test_a_split_by_groups_keeps_each_group_on_one_side():
    groups = [i // 4 for i in range(40)]  # ten groups of four
    kept, held = held_out_split(40, 0.3, groups)
    assert len(held) == 12 and len(kept) + len(held) == 40  # three whole groups
    assert {groups[i] for i in kept}.isdisjoint(groups[i] for i in held)
    assert held_out_split(40, 0.3, groups) == (kept, held)
    with pytest.raises(ValueError, match=r"1 group\(s\) held out whole\) leaves none"):
        held_out_split(5, 0.5, ["one passage"] * 5)


def test_unseen_labels_are_counted_and_named_in_one_warning():
    dev = [TaggedSentence(["a", "b"], ["B-Y", "B-Y"], line=7),
           TaggedSentence(["c"], ["I-Z"], line=9)]
    assert unseen_targets(dev, ["B-X", "O"]) == {"B-Y": 2, "I-Z": 1}
    assert unseen_targets(dev, ["I-Y", "O"], "iob1") == {"Z": 1}  # the type Y is known
    assert unseen_targets(dev, ["B-Y", "I-Z"]) == {}
    with pytest.warns(UserWarning, match=r"dev.txt: tags 'B-Y' \(2 gold tags\), 'I-Z' \(1 "
                      r"gold tag\) never occur in the training file train.txt; the model "
                      r"cannot predict them, so they count as errors"):
        warn_unseen(dev, ["B-X", "O"], "dev.txt", "train.txt")
