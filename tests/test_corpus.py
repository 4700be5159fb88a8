"""Corpus streaming (elmo.data.corpus) and BPTT batching (elmo.data.batching)."""

import gzip
import json
import random
import tracemalloc

import numpy as np
import pytest

from elmo.data import (
    BPTTBatcher,
    BPTTConfig,
    count_tokens,
    expand_paths,
    iter_lines,
    iter_sentences,
)
from elmo.vocab import Vocabulary

# -- corpus ----------------------------------------------------------------------------------


def write(path, text, gz=False):
    data = text.encode("utf-8") if isinstance(text, str) else text
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def test_expand_paths_globs_sorted_plain_kept(tmp_path):
    for name in ["b.txt", "a.txt", "c.gz", "z.txt"]:
        write(tmp_path / name, "x\n")
    (tmp_path / "sub.txt").mkdir()  # directories never match
    got = expand_paths([str(tmp_path / "z.txt"), str(tmp_path / "*.txt")])
    assert [p.name for p in got] == ["z.txt", "a.txt", "b.txt", "z.txt"]
    with pytest.raises(FileNotFoundError, match=r"nothing\*\.txt"):
        expand_paths([str(tmp_path / "a.txt"), str(tmp_path / "nothing*.txt")])
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        expand_paths([tmp_path / "missing.txt"])


def test_iter_lines_plain_and_gzip(tmp_path):
    a = write(tmp_path / "a.txt", "\ufeffone two\r\n\n   \nthree\n\t\nfour")
    b = write(tmp_path / "b.txt.gz", "five six\n\nseven\n", gz=True)
    assert list(iter_lines([a, b])) == ["one two", "three", "four", "five six", "seven"]
    assert list(iter_lines(a)) == ["one two", "three", "four"]  # a single path is fine


def test_iter_lines_reports_invalid_utf8_with_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.txt", b"fine\n\nstill fine\nbroken \xff here\n")
    lines = iter_lines([bad])
    assert next(lines) == "fine"
    with pytest.raises(ValueError, match=r"bad\.txt, line 4: not valid UTF-8"):
        list(lines)


def test_iter_sentences_and_count_tokens(tmp_path):
    path = write(tmp_path / "c.txt", "a b c\n\nHello, world!\n")
    assert list(iter_sentences([path])) == [["a", "b", "c"], ["Hello,", "world!"]]
    assert list(iter_sentences([path], "moses"))[1] == ["Hello", ",", "world", "!"]
    assert list(iter_sentences([path], str.split)) == list(iter_sentences([path]))
    assert count_tokens([path]) == 3 + 1 + 2 + 1  # words plus one </S> per sentence


def test_sharding_partitions_the_stream(tmp_path):
    a = write(tmp_path / "a.txt", "".join(f"s{i}\n\n" for i in range(7)))
    b = write(tmp_path / "b.txt.gz", "".join(f"s{i}\n" for i in range(7, 17)), gz=True)
    everything = list(iter_sentences([a, b]))
    assert len(everything) == 17
    for world in (1, 2, 3, 5):
        shards = [list(iter_sentences([a, b], rank=r, world_size=world)) for r in range(world)]
        for rank, shard in enumerate(shards):
            assert shard == everything[rank::world]
        for start in (0, 1, 3, 10):
            got = list(iter_sentences([a, b], rank=world - 1, world_size=world, start=start))
            assert got == shards[-1][start:]
    with pytest.raises(ValueError, match="rank"):
        list(iter_sentences([a], rank=2, world_size=2))


def test_streaming_memory_does_not_grow_with_corpus(tmp_path):
    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghij", k=40)) for _ in range(100)]
    block = "".join(" ".join(rng.choices(words, k=30)) + "\n" for _ in range(100))
    text = block * 20  # 2000 lines of 30 long words (~1.2 KB), ~2.5 MB in all
    plain = write(tmp_path / "big.txt", text)
    gz = write(tmp_path / "big.txt.gz", text, gz=True)
    size = len(text.encode())
    assert size > 2_000_000
    # Streaming needs a line plus I/O buffers (gzip's are ~100 KB): 256 KB is < 10% of the file
    budget = 256 * 1024
    for path in (plain, gz):
        tracemalloc.start()
        try:
            n = count_tokens([path])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert n == 2000 * 31
        assert peak < budget, f"peak {peak} bytes while streaming {size} bytes from {path.name}"


# -- batching --------------------------------------------------------------------------------


def make_vocab(sentences):
    return Vocabulary.build(sentences)


def run(batcher):
    return list(batcher)


def assert_batches_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for name in ("token_ids_fwd", "next_ids", "token_ids_bwd", "prev_ids", "mask"):
            np.testing.assert_array_equal(getattr(g, name), getattr(w, name), err_msg=name)
        assert g.words_fwd == w.words_fwd
        assert g.words_bwd == w.words_bwd


def test_small_example_by_hand():
    sents = [["a", "b"], ["c"], [], ["d", "e", "f"]]
    vocab = make_vocab(sents)
    batches = run(BPTTBatcher(sents, vocab, BPTTConfig(batch_size=2, unroll_steps=3)))
    assert len(batches) == 2
    b1, b2 = batches
    # row 0 takes "a b" (3 positions); row 1 takes "c" (2) and the first position of "d e f"
    assert b1.words_fwd == [["<S>", "a", "b"], ["<S>", "c", "<S>"]]
    assert b1.words_bwd == [["</S>", "b", "a"], ["</S>", "c", "</S>"]]
    assert vocab.decode(b1.next_ids[0]) == ["a", "b", "</S>"]
    assert vocab.decode(b1.next_ids[1]) == ["c", "</S>", "d"]
    assert vocab.decode(b1.prev_ids[0]) == ["b", "a", "<S>"]
    assert vocab.decode(b1.prev_ids[1]) == ["c", "<S>", "f"]
    np.testing.assert_array_equal(b1.token_ids_fwd[1], vocab.encode(["<S>", "c", "<S>"]))
    np.testing.assert_array_equal(b1.token_ids_bwd[0], vocab.encode(["</S>", "b", "a"]))
    assert b1.mask.all()
    # row 0 finds the corpus exhausted; row 1 finishes "d e f"
    assert b2.mask.tolist() == [[False] * 3, [True] * 3]
    assert b2.words_fwd == [["", "", ""], ["d", "e", "f"]]
    assert vocab.decode(b2.next_ids[1]) == ["e", "f", "</S>"]
    assert b2.words_bwd[1] == ["f", "e", "d"]
    assert vocab.decode(b2.prev_ids[1]) == ["e", "d", "<S>"]
    assert b2.token_ids_fwd[0].tolist() == [0, 0, 0] and b2.next_ids[0].tolist() == [0, 0, 0]
    assert b1.num_tokens + b2.num_tokens == 3 + 2 + 4


def random_corpus(n=80, seed=0):
    rng = random.Random(seed)
    return [[f"w{rng.randrange(30)}" for _ in range(rng.randrange(0, 13))] for _ in range(n)]


def row_sentences(batches, row, direction):
    """Split one row's stream back into sentences (forward order)."""
    words = [
        w
        for b in batches
        for w, m in zip(getattr(b, f"words_{direction}")[row], b.mask[row], strict=True)
        if m
    ]
    start = "<S>" if direction == "fwd" else "</S>"
    out, cur = [], None
    for w in words:
        if w == start:
            if cur is not None:
                out.append(cur)
            cur = []
        else:
            cur.append(w)
    out.append(cur)
    return out if direction == "fwd" else [s[::-1] for s in out]


@pytest.mark.parametrize("shuffle_window", [0, 7])
def test_every_sentence_once_and_directions_aligned(shuffle_window):
    sents = random_corpus()
    vocab = make_vocab(sents)
    cfg = BPTTConfig(batch_size=3, unroll_steps=5, shuffle_window=shuffle_window, seed=1)
    batches = run(BPTTBatcher(sents, vocab, cfg))
    assert sum(b.num_tokens for b in batches) == sum(len(s) + 1 for s in sents if s)
    seen = []
    for row in range(3):
        fwd, bwd = row_sentences(batches, row, "fwd"), row_sentences(batches, row, "bwd")
        assert fwd == bwd  # backward rows read the same sentences, reversed
        seen += fwd
    assert sorted(seen) == sorted(s for s in sents if s)
    for row in range(3):  # (input, target) pairs are those of the row's sentences in order
        sentences = row_sentences(batches, row, "fwd")
        for direction, inputs, targets in (
            ("fwd", "token_ids_fwd", "next_ids"),
            ("bwd", "token_ids_bwd", "prev_ids"),
        ):
            got = [
                (int(i), int(t))
                for b in batches
                for i, t, m in zip(
                    getattr(b, inputs)[row], getattr(b, targets)[row], b.mask[row], strict=True
                )
                if m
            ]
            want = []
            for s in sentences:
                ids = vocab.encode(["<S>", *s, "</S>"])
                ids = ids if direction == "fwd" else ids[::-1]
                want += list(zip(ids[:-1], ids[1:], strict=True))
            assert got == want
            words = [
                w
                for b in batches
                for w, m in zip(getattr(b, f"words_{direction}")[row], b.mask[row], strict=True)
                if m
            ]
            assert vocab.encode(words) == [i for i, _ in got]  # strings match the ids
    # masks only end: once a row is done it stays done
    for row in range(3):
        flat = np.concatenate([b.mask[row] for b in batches])
        assert not np.any(flat[1:] & ~flat[:-1])


def test_shuffle_stays_within_windows_and_is_seeded():
    sents = [[f"s{i}"] for i in range(23)]
    vocab = make_vocab(sents)

    def order(seed):
        cfg = BPTTConfig(batch_size=1, unroll_steps=4, shuffle_window=5, seed=seed)
        batches = run(BPTTBatcher(sents, vocab, cfg))
        return [int(sent[0][1:]) for sent in row_sentences(batches, 0, "fwd")]

    got = order(3)
    assert got == order(3) and got != order(4) and got != list(range(23))
    for pos, i in enumerate(got):
        assert pos // 5 == i // 5


@pytest.mark.parametrize("shuffle_window", [0, 6])
@pytest.mark.parametrize("k", [0, 1, 4, 9])
def test_resume_continues_exactly(k, shuffle_window):
    sents = random_corpus(n=60, seed=2)
    vocab = make_vocab(sents)
    cfg = BPTTConfig(batch_size=3, unroll_steps=4, shuffle_window=shuffle_window, seed=5)
    full = run(BPTTBatcher(sents, vocab, cfg))
    assert len(full) > 9

    first = BPTTBatcher(iter(sents), vocab, cfg)  # a one-shot generator works too
    it = iter(first)
    head = [next(it) for _ in range(k)]
    state = json.loads(json.dumps(first.state_dict()))  # plain data, survives JSON

    resumed = BPTTBatcher(sents, vocab, cfg)  # the same corpus, from the start
    resumed.load_state_dict(state)
    assert_batches_equal(head + run(resumed), full)

    starts = []

    def from_start(start):  # a reader that can skip cheaply is handed the position
        starts.append(start)
        return sents[start:]

    again = BPTTBatcher(from_start, vocab, cfg)
    again.load_state_dict(state)
    assert_batches_equal(head + run(again), full)
    window = max(shuffle_window, 1)
    assert starts == [state["consumed"] // window * window]


def test_resume_from_a_corpus_file(tmp_path):
    sents = random_corpus(n=40, seed=3)
    path = write(tmp_path / "c.txt", "".join(" ".join(s) + "\n" for s in sents))
    vocab = make_vocab(sents)
    cfg = BPTTConfig(batch_size=2, unroll_steps=6)

    def source(start):
        return iter_sentences([path], start=start)

    full = run(BPTTBatcher(source, vocab, cfg))
    first = BPTTBatcher(source, vocab, cfg)
    head = [b for _, b in zip(range(5), first, strict=False)]
    resumed = BPTTBatcher(source, vocab, cfg)
    resumed.load_state_dict(first.state_dict())
    assert_batches_equal(head + run(resumed), full)


def test_state_must_match_config_and_precede_iteration():
    sents = random_corpus(n=10)
    vocab = make_vocab(sents)
    state = BPTTBatcher(sents, vocab, BPTTConfig(batch_size=2)).state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        BPTTBatcher(sents, vocab, BPTTConfig(batch_size=3)).load_state_dict(state)
    started = BPTTBatcher(sents, vocab, BPTTConfig(batch_size=2, unroll_steps=2))
    next(iter(started))
    with pytest.raises(RuntimeError):
        started.load_state_dict(state)
