"""Data-parallel training with torch.distributed, launched by torchrun (or run alone).

Every rank holds a full replica and reads its own part of the sentence stream. After each
backward pass the gradients are averaged with all-reduce, so the replicas take identical
optimizer steps and stay identical. (This is DistributedDataParallel's arithmetic without its
bucketing hooks, which would have to be rebuilt whenever gradual unfreezing changes the set of
trainable parameters.) gloo on CPU, nccl on GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from elmo.device import resolve_device
from elmo.errors import ElmoError

# Waiting for rank 0 to scan a large corpus (vocabulary, token count) can take hours.
PREPARE_TIMEOUT = timedelta(days=1)


@dataclass
class World:
    """This process's place among the training processes (a single process by default)."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _slow_group: Any = None  # gloo group with a long timeout, for waiting on preparation

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def share_from_main(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank; the others wait as long as rank 0 needs (hours when
        it scans a large corpus)."""
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self._slow_group)
        return box[0]

    def on_main(self, work: Callable[[], Any], what: str) -> Any:
        """`work()` on rank 0 and its (picklable) result on every rank; the others wait for
        it. An error on rank 0 (`what` it could not do) is raised on every rank."""
        result = None
        if self.is_main:
            try:
                result = work()
            except Exception as err:
                self.share_from_main({"error": f"rank 0 could not {what}: {err}"})
                raise
        shared = self.share_from_main({"result": result})
        if "error" in shared:
            raise ElmoError(shared["error"])
        return shared["result"]

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """All-reduce sum in place (no-op alone); returns the tensor."""
        if self.distributed:
            dist.all_reduce(tensor)
        return tensor

    def average_gradients(self, params: Iterable[nn.Parameter]) -> None:
        """Replace every existing gradient by its mean over the ranks."""
        if not self.distributed:
            return
        for param in params:
            if param.grad is not None:
                dist.all_reduce(param.grad)
                param.grad.div_(self.world_size)

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj` (picklable, CPU tensors), in rank order."""
        if not self.distributed:
            return [obj]
        objects: list[Any] = [None] * self.world_size
        dist.all_gather_object(objects, obj)
        return objects

    def same_on_all_ranks(self, tensors: Iterable[torch.Tensor]) -> bool:
        """Whether the tensors are bit-identical on every rank (one checksum compared)."""
        if not self.distributed:
            return True
        checksum = torch.stack([t.detach().sum(dtype=torch.float64) for t in tensors])
        low, high = checksum.clone(), checksum.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        return bool(torch.equal(low, high))

    def close(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()


def init_world(device: str | None = None) -> World:
    """Join the process group described by torchrun's environment (RANK, WORLD_SIZE, ...).

    Without those variables this is a single process and nothing is initialised.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    resolved = resolve_device(device, local_rank)
    if world_size == 1:
        return World(device=resolved)
    if resolved.type == "cuda":
        torch.cuda.set_device(resolved)
    backend = "nccl" if resolved.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method="env://")
    slow = dist.new_group(backend="gloo", timeout=PREPARE_TIMEOUT)
    return World(dist.get_rank(), dist.get_world_size(), resolved, slow)
