"""Data-parallel training: 2 CPU processes (gloo), each reading its own half of the corpus,
end with bit-identical parameters, and rank 0's checkpoint holds both ranks' data positions."""

from __future__ import annotations

import os
import socket

import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from elmo.runs import CHECKPOINT_NAME
from elmo.training.checkpoint import Checkpoint
from elmo.training.distributed import init_world
from elmo.training.trainer import Trainer
from tests.test_training import tiny_config, write_corpus

WORLD_SIZE = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, directory: str) -> None:
    """One torchrun-like rank: the environment torchrun would set, then a normal run."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD_SIZE))
    torch.set_num_threads(1)
    out = os.path.join(directory, "run")
    config = tiny_config(os.path.join(directory, "train.txt"),
                         os.path.join(directory, "valid.txt"), max_steps=12,
                         checkpoint_every=6, eval_every=6, softmax="sampled", num_samples=12,
                         checkpoint_minutes=1e-9)  # every step: the ranks agree on the timers
    world = init_world(config.device)
    try:
        trainer = Trainer(config, out, world, progress=False)
        trainer.run()
        params = {k: v.detach().clone() for k, v in trainer.lm.state_dict().items()}
        save_file(params, os.path.join(directory, f"rank{rank}.safetensors"))
    finally:
        world.close()


def test_two_processes_stay_identical(tmp_path):
    write_corpus(tmp_path)
    mp.start_processes(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD_SIZE,
                       start_method="spawn")
    rank0, rank1 = (load_file(tmp_path / f"rank{r}.safetensors") for r in range(WORLD_SIZE))
    assert rank0.keys() == rank1.keys()
    assert all(torch.equal(rank0[k], rank1[k]) for k in rank0)

    ckpt = Checkpoint.load(tmp_path / "run" / CHECKPOINT_NAME)
    assert ckpt.step == 12 and ckpt.finished and len(ckpt.ranks) == WORLD_SIZE
    assert all(torch.equal(ckpt.model[k], rank0[k]) for k in rank0)
    streams = [r.stream["batcher"] for r in ckpt.ranks]
    assert streams[0]["rows"] != streams[1]["rows"]  # each rank read its own sentences
    assert not torch.equal(ckpt.ranks[0].rng["torch"], ckpt.ranks[1].rng["torch"])
    assert ckpt.best_valid_ppl is not None
