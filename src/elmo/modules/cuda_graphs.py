"""CUDA graphs of the LSTM stacks' inference forward, one per (batch, length) bucket.

A step of the LSTM is a dozen small kernels; on a GPU their launches, not their arithmetic, set
the speed of a step. `LSTMGraphs` captures the whole masked forward of a `StackedLSTM` (the
input products, every step of every layer) once per bucket of shapes, and replays it: one
launch per batch. A batch is padded up to its bucket (rows of length 0, steps past every
length), which the masked loop ignores, so the results equal the eager loop's.

Every graph has static input buffers, filled before each replay, and static outputs, copied
out by the caller before the next replay. The graphs share one memory pool: a graph's
temporaries may lie where another graph's outputs were, which is safe because no output is
read after another replay. The cache is bounded (MAX_GRAPHS graphs, MAX_STATIC_BYTES of
static buffers; the least recently used go first) and forgotten when the weights move
(`.to()`, a new dtype). A graph is captured per bucket, dtype, autocast and TF32 setting.
If capture fails, the caller runs eagerly from then on; the reason is logged once.

They run where `BiLM.cuda_graphs` is True, which is off by default (CUDA_GRAPHS below).
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from dataclasses import dataclass

import torch

from elmo.device import tf32_matmuls
from elmo.modules.lstm import StackedLSTM

log = logging.getLogger(__name__)
# Whether stateless CUDA inference replays graphs when not told: no. Eager was as fast or
# faster in every embedding run measured (docs/speed.md, "On a GPU"; H200, torch 2.11.0+cu130,
# `original` at 16,384-token batches: TF32 178,000 tokens/s eager against 152,000 with graphs,
# bf16 200,000 against 152,000; on a second H200 up to 10% slower; a first pass in TF32 with
# graphs, which captures them, 2.4-3x slower).
CUDA_GRAPHS = False
MAX_GRAPHS = 32
MAX_STATIC_BYTES = 2 * 2**30  # the graphs' static inputs and outputs, all together
MAX_GRAPH_STEPS = 1024  # longer batches run eagerly
# Larger batches run eagerly: their kernels are long enough that launches cost little, and
# padding to the bucket costs more (H200, 2026-11-26: `original` at 16,384-token batches,
# TF32, 56,304 tokens/s with graphs, 81,267 eager).
MAX_GRAPH_POSITIONS = 8192


def bucket(n: int) -> int:
    """n rounded up to 4 values per octave (1..8 exact; then 8, 10, 12, 14, 16, 20, ...):
    at most 25% padding, few distinct shapes."""
    if n <= 8:
        return n
    step = 2 ** (math.floor(math.log2(n)) - 2)
    return -(-n // step) * step


@dataclass
class _Graph:
    graph: torch.cuda.CUDAGraph
    x: torch.Tensor  # (D, B, T, P) static input
    lengths: torch.Tensor  # (B,) static input
    outputs: list[torch.Tensor]  # L x (D, B, T, P) static outputs

    @property
    def static_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.x, *self.outputs))


class LSTMGraphs:
    """Replays `lstm`'s masked inference forward from a cache of CUDA graphs."""

    def __init__(self, lstm: StackedLSTM, max_graphs: int = MAX_GRAPHS) -> None:
        self.lstm, self.max_graphs = lstm, max_graphs
        self.graphs: OrderedDict[tuple, _Graph] = OrderedDict()
        self.failed: str | None = None  # why capture failed, once it has
        self._weights: tuple = ()
        self._pool = None

    def __getstate__(self) -> dict:  # copies and pickles start with no graphs
        return {"lstm": self.lstm, "max_graphs": self.max_graphs}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["lstm"], state["max_graphs"])

    def __call__(self, x: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor] | None:
        """x (D, B, T, P), lengths (B,) sorted longest first -> the L layer outputs (D, B, T, P)
        as views of static buffers (copy them before the next call), or None where graphs
        do not run (capture failed, more than MAX_GRAPH_STEPS steps or MAX_GRAPH_POSITIONS
        positions): run eagerly."""
        if self.failed is not None:
            return None
        weights = tuple((p.data_ptr(), p.dtype) for p in self.lstm.parameters())
        if weights != self._weights:  # new weights: graphs read the old addresses
            self.graphs.clear()
            self._weights = weights
        b, t = x.shape[1:3]
        if t > MAX_GRAPH_STEPS or b * t > MAX_GRAPH_POSITIONS:  # eager is as fast there
            return None
        # What decides the kernels captured: shapes, dtypes, autocast, TF32.
        autocast = torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda")
        key = (bucket(b), bucket(t), x.dtype, autocast, tf32_matmuls())
        graph = self.graphs.get(key)
        if graph is None:
            graph = self._capture(key, x)
            if graph is None:
                return None
        self.graphs.move_to_end(key)
        graph.x[:, :b, :t].copy_(x)
        graph.lengths.zero_()
        graph.lengths[:b].copy_(lengths)
        graph.graph.replay()
        return [out[:, :b, :t] for out in graph.outputs]

    def _capture(self, key: tuple, like: torch.Tensor) -> _Graph | None:
        b, t = key[:2]
        d, p = like.shape[0], like.shape[-1]
        with torch.inference_mode(False):  # inputs any later mode may write into
            x = like.new_zeros(d, b, t, p)
            lengths = torch.zeros(b, dtype=torch.long, device=like.device)
        # Under autocast, the weights' casts must be captured as kernels: a cast cached
        # before the capture would be freed when autocast ends, and the graph would read it.
        try:
            casts = torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"),
                                   enabled=torch.is_autocast_enabled("cuda"), cache_enabled=False)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            side = torch.cuda.Stream(like.device)
            side.wait_stream(torch.cuda.current_stream(like.device))
            with casts, torch.cuda.stream(side):  # warm-up: cuBLAS handles and workspaces
                self.lstm(x, lengths, step_loop="masked")
            torch.cuda.current_stream(like.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with casts, torch.cuda.graph(graph, pool=self._pool):
                outputs, _ = self.lstm(x, lengths, step_loop="masked")
        except Exception as err:  # any failure means: run eagerly
            self.failed = f"{type(err).__name__}: {err}"
            self.graphs.clear()
            log.warning("CUDA graph capture of the LSTM failed (%s); running eagerly",
                        self.failed)
            return None
        captured = _Graph(graph, x, lengths, outputs)
        while self.graphs and (len(self.graphs) >= self.max_graphs or captured.static_bytes
                               + sum(g.static_bytes for g in self.graphs.values())
                               > MAX_STATIC_BYTES):
            self.graphs.popitem(last=False)  # the least recently used
        self.graphs[key] = captured
        return captured
