"""Truncated-BPTT batches for biLM pretraining, as bilm-tf builds them.

Each sentence ``w1 .. wn`` becomes ``<S> w1 .. wn </S>`` forward and ``</S> wn .. w1 <S>``
backward. Each of the ``B`` batch rows consumes its own stream of sentences, concatenated;
a batch is the next ``T`` positions of every row, so the LSTM state is carried across batches
row by row. A sentence of ``n`` words gives ``n + 1`` positions (the last token is only ever
a target). When a row runs out of its current sentence it draws the next one from the shared
(optionally window-shuffled) sentence stream, bilm-tf style.

Forward and backward rows consume the *same* sentences in the same order (each sentence
gives ``n + 1`` positions in both directions), so one pass over the corpus trains both.

Resuming: :meth:`BPTTBatcher.state_dict` records the number of sentences drawn from the
stream plus each row's unfinished sentence; a fresh batcher over the same input, loaded with
that state, continues exactly where the first one stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from elmo.vocab import BOS, EOS, Vocabulary

SentenceSource = Iterable[list[str]] | Callable[[int], Iterable[list[str]]]

_STATE_VERSION = 1
_ORDER_KEYS = ("batch_size", "unroll_steps", "shuffle_window", "seed")  # decide data order


@dataclass
class BPTTConfig:
    """How sentences are cut into batches."""

    batch_size: int = 128  # B: parallel streams
    unroll_steps: int = 20  # T: positions per row per batch
    max_chars: int = 50  # characters per word for the char-CNN encoder of ``words_*``
    shuffle_window: int = 0  # shuffle sentences within consecutive windows of this many (0: off)
    seed: int = 0  # seed of the window shuffle

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.unroll_steps < 1 or self.max_chars < 3:
            raise ValueError(f"invalid batch shape in {self}")
        if self.shuffle_window < 0 or self.seed < 0:
            raise ValueError(f"shuffle_window and seed must be >= 0 in {self}")


@dataclass
class Batch:
    """One BPTT step for both directions. Padding (``mask`` False) holds id 0 and ``""``."""

    token_ids_fwd: np.ndarray  # (B, T) int64 forward inputs
    next_ids: np.ndarray  # (B, T) int64 forward targets (next token)
    token_ids_bwd: np.ndarray  # (B, T) int64 backward inputs (reversed sentences)
    prev_ids: np.ndarray  # (B, T) int64 backward targets (previous token)
    words_fwd: list[list[str]]  # B lists of T strings: forward inputs for the char encoder
    words_bwd: list[list[str]]  # B lists of T strings: backward inputs
    mask: np.ndarray  # (B, T) bool, False after a row's stream ended

    @property
    def num_tokens(self) -> int:
        """Number of real (unmasked) positions, per direction."""
        return int(self.mask.sum())


@dataclass
class _Row:
    """A row's current sentence: forward tokens/ids and how many positions are used."""

    words: list[str]  # (L,) <S> w1 .. wn </S>
    ids: np.ndarray  # (L,) int64
    pos: int = 0
    words_rev: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.words_rev = self.words[::-1]

    @property
    def remaining(self) -> int:
        return len(self.words) - 1 - self.pos


def _window_shuffle(
    source: Iterator[list[str]], window: int, seed: int, first_window: int
) -> Iterator[list[str]]:
    """Permute consecutive windows of ``window`` sentences; window ``k`` uses seed (seed, k)."""
    k = first_window
    while block := list(islice(source, window)):
        for j in np.random.default_rng([seed, k]).permutation(len(block)):
            yield block[j]
        k += 1


class BPTTBatcher:
    """Iterate :class:`Batch` es over tokenized sentences.

    ``sentences`` is an iterable of token lists, or a function ``start -> iterable`` that
    returns the stream from its ``start``-th sentence on (used when resuming, so a corpus
    reader can skip cheaply, e.g. ``lambda s: iter_sentences(paths, start=s)``). Empty
    sentences are skipped. Iteration stops once every row's stream has ended; the last
    batch is padded where ``mask`` is False.
    """

    def __init__(
        self, sentences: SentenceSource, vocab: Vocabulary, config: BPTTConfig | None = None
    ) -> None:
        self.config = config or BPTTConfig()
        self.vocab = vocab
        self._source = sentences
        self._stream: Iterator[list[str]] | None = None
        self._consumed = 0  # sentences drawn from the (shuffled) stream, empty ones included
        self._exhausted = False
        self._batches = 0
        self._rows: list[_Row | None] = [None] * self.config.batch_size

    # -- progress and resumption ----------------------------------------------------------

    @property
    def sentences_consumed(self) -> int:
        """Sentences drawn from the stream so far (in stream order)."""
        return self._consumed

    @property
    def batches_yielded(self) -> int:
        return self._batches

    def state_dict(self) -> dict[str, Any]:
        """Data position after the last yielded batch (plain Python, JSON-serializable)."""
        cfg = asdict(self.config)
        return {
            "version": _STATE_VERSION,
            **{key: cfg[key] for key in _ORDER_KEYS},
            "consumed": self._consumed,
            "exhausted": self._exhausted,
            "batches": self._batches,
            "rows": [
                None if row is None else {"words": row.words[1:-1], "pos": row.pos}
                for row in self._rows
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a position saved by :meth:`state_dict`; call before iterating."""
        if self._stream is not None or self._consumed:
            raise RuntimeError("load_state_dict must be called before iteration starts")
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported batcher state version {state.get('version')!r}")
        cfg = asdict(self.config)
        diff = [f"{k}: saved {state[k]}, now {cfg[k]}" for k in _ORDER_KEYS if state[k] != cfg[k]]
        if diff:
            raise ValueError("batcher state does not match the config (" + "; ".join(diff) + ")")
        self._consumed = int(state["consumed"])
        self._exhausted = bool(state["exhausted"])
        self._batches = int(state["batches"])
        self._rows = []
        for saved in state["rows"]:
            row = None
            if saved is not None:
                row = self._make_row(saved["words"])
                row.pos = int(saved["pos"])
            self._rows.append(row)

    # -- iteration ------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Batch]:
        cfg = self.config
        B, T = cfg.batch_size, cfg.unroll_steps
        while True:
            ids_f = np.zeros((B, T), dtype=np.int64)
            next_ids = np.zeros((B, T), dtype=np.int64)
            ids_b = np.zeros((B, T), dtype=np.int64)
            prev_ids = np.zeros((B, T), dtype=np.int64)
            mask = np.zeros((B, T), dtype=bool)
            words_f = [[""] * T for _ in range(B)]
            words_b = [[""] * T for _ in range(B)]
            for i in range(B):
                t = 0
                while t < T:
                    row = self._rows[i]
                    if row is None or row.remaining == 0:
                        row = self._rows[i] = self._draw()
                        if row is None:
                            break
                    p = row.pos
                    k = min(row.remaining, T - t)
                    rev = row.ids[::-1]
                    ids_f[i, t : t + k] = row.ids[p : p + k]
                    next_ids[i, t : t + k] = row.ids[p + 1 : p + k + 1]
                    ids_b[i, t : t + k] = rev[p : p + k]
                    prev_ids[i, t : t + k] = rev[p + 1 : p + k + 1]
                    words_f[i][t : t + k] = row.words[p : p + k]
                    words_b[i][t : t + k] = row.words_rev[p : p + k]
                    row.pos += k
                    t += k
                mask[i, :t] = True
            if not mask.any():
                return
            self._batches += 1
            yield Batch(ids_f, next_ids, ids_b, prev_ids, words_f, words_b, mask)

    def _make_row(self, words: list[str]) -> _Row:
        full = [BOS, *words, EOS]
        return _Row(full, np.asarray(self.vocab.encode(full), dtype=np.int64))

    def _draw(self) -> _Row | None:
        """Next non-empty sentence of the stream, or None at its end."""
        if self._exhausted:
            return None
        if self._stream is None:
            self._stream = self._open()
        for words in self._stream:
            self._consumed += 1
            if words:
                return self._make_row(list(words))
        self._exhausted = True
        return None

    def _open(self) -> Iterator[list[str]]:
        """The sentence stream positioned after the ``consumed`` sentences already drawn."""
        window = self.config.shuffle_window
        if window > 1:
            first_window, offset = divmod(self._consumed, window)
            skip = first_window * window
        else:
            skip, offset = self._consumed, 0
        if callable(self._source):
            source = iter(self._source(skip))
        else:
            source = islice(iter(self._source), skip, None)
        if window > 1:
            stream = _window_shuffle(source, window, self.config.seed, first_window)
            return islice(stream, offset, None)
        return source
