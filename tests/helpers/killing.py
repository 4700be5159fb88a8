"""Killing a process at a chosen moment: a child that runs a function of the library and
SIGKILLs itself just before its N-th call of another (creating an HDF5 dataset, copying an
HDF5 object, writing a safetensors file, writing a training checkpoint).

The children are forked from multiprocessing's fork server, which imports torch, h5py and
safetensors once: a kill costs the work before it, not a start of Python. A child patches its
moment's function first and only then imports its work (given as "module:function"), so that
modules which import the function by name (`from safetensors.torch import save_file`) get the
dying one; for the same reason this module imports nothing of elmo.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
from typing import Any

import torch

# Where a child can die: "module:attribute" of the function, looked up in the child.
MOMENTS = {"dataset": "h5py:Group.create_dataset", "copy": "h5py:Group.copy",
           "save": "safetensors.torch:save_file",
           "checkpoint": "elmo.training.checkpoint:Checkpoint.save"}
FORK_SERVER = multiprocessing.get_context("forkserver")
FORK_SERVER.set_forkserver_preload(["torch", "h5py", "safetensors.torch"])


def killed_at(moment: str, n: int, work: str, *args: Any, threads: int = 1,
              **kwargs: Any) -> int:
    """The exit code of a child that runs `work` ("module:function") with `args` and `kwargs`
    on `threads` torch threads (the fork server never ran torch, so any number works), killed
    just before its n-th call of MOMENTS[moment]: -SIGKILL if the work got there."""
    child = FORK_SERVER.Process(target=_die_at, args=(moment, n, threads, work, args, kwargs))
    child.start()
    child.join(300)
    return child.exitcode


def _die_at(moment: str, n: int, threads: int, work: str, args: tuple,
            kwargs: dict[str, Any]) -> None:
    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # given: a command keeps them, however busy
    owner, name = _resolve(MOMENTS[moment])
    real, count = getattr(owner, name), [0]

    def dying(*a: Any, **k: Any) -> Any:
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)

    setattr(owner, name, dying)
    owner, name = _resolve(work)
    getattr(owner, name)(*args, **kwargs)


def _resolve(path: str) -> tuple[Any, str]:
    """"module:a.b" -> (module.a, "b"), importing the module."""
    module, attributes = path.split(":")
    *outer, name = attributes.split(".")
    owner = importlib.import_module(module)
    for attribute in outer:
        owner = getattr(owner, attribute)
    return owner, name


def embed_file(model: str, src: str, out: str, use_sentence_keys: bool) -> None:
    """A work: `Embedder.embed_file` with 2 sentences a batch, no progress bar."""
    from elmo.embed import Embedder

    Embedder.from_pretrained(model, batch_size=2).embed_file(
        src, out, use_sentence_keys=use_sentence_keys, progress=False)
