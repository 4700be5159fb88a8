"""Memory-aware batching on a device: a token budget chosen from the free memory, and batches
that run out of memory halved and computed again.

`token_budget` is the `max_tokens` ("auto") of an `Embedder` on a device: 16,384 padded
positions on the CPU; on CUDA what half of the free memory holds, by `bytes_per_position`.
`compute_halving` runs a batch; where it raises `torch.OutOfMemoryError`, each half is run
alone, down to one sentence, which raises `DeviceMemoryError` if it does not fit either.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from elmo.config import BiLMConfig
from elmo.errors import ElmoError

T = TypeVar("T")
R = TypeVar("R")

AUTO = "auto"
# The budget off CUDA: 256 sentences of up to 62 tokens (4,096 before 2026-11-26).
CPU_MAX_TOKENS = 16384
# The most an automatic budget gives: a chunk of CHUNK_BATCHES (4) batches' layers is held in
# host memory (4 x 16,384 positions x (L+1) x 2P floats: 0.8 GB for `original`).
MAX_AUTO_TOKENS = 16384
FREE_SHARE = 0.5  # of the free memory a batch may use: the rest is for what is not counted
CHAR_ID_BYTES = 3 * 8  # int64 char ids per character: the ids, with boundaries, sorted
SPLIT_IT = ("split it into shorter lines (a protein into pieces), or embed on the CPU "
            "(--device cpu); a smaller --max-tokens does not help a single sentence")

logger = logging.getLogger(__name__)


class DeviceMemoryError(ElmoError):
    """Sentences that do not fit in a device's free memory and cannot be split: one sentence
    (`index`: its number among those embedded, `tokens`: its length), or a batch of `rows`
    sentences from `index` on in stateful mode, which carries the LSTM state per row
    (`tokens`: the longest). `subject` names sentence `index` (default: "sentence INDEX");
    `advice` says what to do about one sentence."""

    def __init__(self, device: torch.device | str, tokens: int, index: int, rows: int = 1,
                 subject: str | None = None, advice: str = SPLIT_IT) -> None:
        self.device, self.tokens, self.index, self.rows = device, tokens, index, rows
        self.subject, self.advice = subject, advice
        subject = subject or f"sentence {index}"
        if rows > 1:
            message = (f"a batch of {rows} sentences from {subject} on (the longest "
                       f"{tokens:,} tokens) does not fit in the free memory of {device}, and "
                       "--stateful cannot split a batch (each row carries its LSTM state on): "
                       "lower --batch-size, split long lines, or embed on the CPU "
                       "(--device cpu)")
        else:
            message = (f"{subject} ({tokens:,} tokens) does not fit in the free memory "
                       f"of {device}, even alone: {advice}")
        super().__init__(message)

    def __reduce__(self) -> tuple:  # pickled whole (Ray sends errors between processes)
        return DeviceMemoryError, (self.device, self.tokens, self.index, self.rows,
                                   self.subject, self.advice)

    def changed(self, **fields: int | str) -> DeviceMemoryError:
        """The same error with other `index`, `subject` (sentence `index` named as a file's
        line or a request's input) or `advice`."""
        return DeviceMemoryError(**{"device": self.device, "tokens": self.tokens,
                                    "index": self.index, "rows": self.rows,
                                    "subject": self.subject, "advice": self.advice, **fields})


def free_memory(device: torch.device) -> int:
    """Free bytes on a CUDA device: the one probe of the device's memory (tests replace it)."""
    free, _total = torch.cuda.mem_get_info(device)
    return free


def bytes_per_position(config: BiLMConfig, dtype: torch.dtype = torch.float32) -> int:
    """What one padded position of a batch costs at the peak of inference, counted high.

    Per position: the L+1 returned layers of 2P (and their float32 copy for the host), each
    LSTM layer's 2 x P outputs three times (the steps, their stack, the copy in input order),
    the token vectors four times (the forward input, the backward one, their stack and its
    copy sorted by length), the input-to-gate products of both directions (2 x 4C), the cell
    and hidden states of both directions with their next step (2 x 2 x (C + P), as if every
    position were a row), the char-CNN's filters and highway layers of a token (as if every
    position were a distinct token) and its char ids (int64). Costs that do not grow with the
    batch (weights, the char-CNN's convolutions of 256 tokens at a time) are left to the other
    half of the free memory.
    """
    p, c, n = config.projection_dim, config.lstm_dim, config.n_layers
    values = ((n + 1) * 2 * p * 2
              + 3 * n * 2 * p
              + 4 * 2 * p
              + 2 * 4 * c
              + 2 * 2 * (c + p)
              + config.n_filters * (2 + 2 * config.n_highway))
    return values * dtype.itemsize + config.max_characters_per_token * CHAR_ID_BYTES


def token_budget(config: BiLMConfig, device: torch.device,
                 dtype: torch.dtype = torch.float32) -> int:
    """The padded positions a batch may hold on `device` (`max_tokens="auto"`): 16,384 off
    CUDA; on CUDA the positions that half of the free memory holds (`bytes_per_position`),
    rounded down to a power of two (the same budget again when the free memory is about the
    same, so that a killed run resumes) and at most 16,384. Measure after the model is on the
    device: its weights are not free."""
    if device.type != "cuda":
        return CPU_MAX_TOKENS
    free = free_memory(device)
    fits = int(free * FREE_SHARE) // bytes_per_position(config, dtype)
    budget = min(MAX_AUTO_TOKENS, 1 << max(fits.bit_length() - 1, 0))
    logger.info("%s: %.1f GiB free, %s bytes a position: max_tokens %d", device,
                free / 2**30, f"{bytes_per_position(config, dtype):,}", budget)
    return budget


def resolve_max_tokens(max_tokens: int | str, config: BiLMConfig, device: torch.device,
                       dtype: torch.dtype = torch.float32) -> int:
    """A number (>= 1) as given; "auto": `token_budget`. ValueError for anything else."""
    if max_tokens == AUTO:
        return token_budget(config, device, dtype)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be {AUTO!r} or a whole number >= 1, got "
                         f"{max_tokens!r}")
    return max_tokens


def release_cached_memory(device: torch.device) -> None:
    """Free what a failed batch left: unreachable tensors, then the CUDA caching allocator's
    unused blocks."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def compute_halving(
    compute: Callable[[Sequence[T]], list[R]],
    items: Sequence[T],
    device: torch.device,
    too_large: Callable[[Sequence[T], int], DeviceMemoryError],
    split: bool = True,
    offset: int = 0,
) -> list[R]:
    """`compute(items)`, one result per item. Where it runs out of device memory, the cached
    memory is freed and each half of `items` computed alone, recursively: the results come
    in the order of `items`. Items that cannot be halved (one, or any number when `split` is
    false) and do not fit raise `too_large(them, number of the first)` (numbered from
    `offset`), without the out-of-memory traceback."""
    try:
        return compute(items)
    except torch.OutOfMemoryError:
        pass  # leave the handler first: its traceback holds the failed batch's tensors
    release_cached_memory(device)
    if len(items) == 1 or not split:
        raise too_large(items, offset)
    logger.warning("%s: out of memory for %d sentences from %d on; computing each half alone",
                   device, len(items), offset)
    half = len(items) // 2
    return [*compute_halving(compute, items[:half], device, too_large, split, offset),
            *compute_halving(compute, items[half:], device, too_large, split, offset + half)]
