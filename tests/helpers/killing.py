"""Killing a process at a chosen moment: a child process that SIGKILLs itself just before its
N-th call of a function (creating an HDF5 dataset, copying an HDF5 object, writing a
safetensors file).

The children are forked from multiprocessing's fork server, which imports torch, h5py and
safetensors once: a kill costs the work before it, not a start of Python. A child patches the
moment's function first and only then imports its work (given as "module:function"), so that
modules which import the function by name (`from safetensors.torch import save_file`) get the
dying one; for the same reason this module imports nothing of elmo at its top.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
from typing import Any

import h5py
import safetensors.torch
import torch

MOMENTS = {"dataset": (h5py.Group, "create_dataset"), "copy": (h5py.Group, "copy"),
           "save": (safetensors.torch, "save_file")}
FORK_SERVER = multiprocessing.get_context("forkserver")
FORK_SERVER.set_forkserver_preload(["torch", "h5py", "safetensors.torch"])


def killed_at(moment: str, n: int, work: str, *args: Any, **kwargs: Any) -> int:
    """The exit code of a child that runs `work` ("module:function") with `args` and
    `kwargs` (1 thread), killed just before its n-th call of MOMENTS[moment]: -SIGKILL if
    the work got there."""
    child = FORK_SERVER.Process(target=_die_at, args=(moment, n, work, args, kwargs))
    child.start()
    child.join(300)
    return child.exitcode


def _die_at(moment: str, n: int, work: str, args: tuple, kwargs: dict[str, Any]) -> None:
    torch.set_num_threads(1)
    owner, name = MOMENTS[moment]
    real, count = getattr(owner, name), [0]

    def dying(*a: Any, **k: Any) -> Any:
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)

    setattr(owner, name, dying)
    module, function = work.split(":")
    getattr(importlib.import_module(module), function)(*args, **kwargs)


def embed_file(model: str, src: str, out: str, use_sentence_keys: bool) -> None:
    """A work: `Embedder.embed_file` with 2 sentences a batch, no progress bar."""
    from elmo.embed import Embedder

    Embedder.from_pretrained(model, batch_size=2).embed_file(
        src, out, use_sentence_keys=use_sentence_keys, progress=False)
