"""Data-parallel training: 2 CPU processes (gloo), each reading its own half of the corpus,
end with bit-identical parameters, and rank 0's checkpoint holds both ranks' data positions;
`elmo train` under torchrun takes the steps of one process with both ranks' rows."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from elmo.cli import main
from elmo.runs import CHECKPOINT_NAME
from elmo.training.checkpoint import Checkpoint
from elmo.training.distributed import init_world
from elmo.training.trainer import Trainer
from tests.helpers.training import tiny_config, write_corpus

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


def test_torchrun_equals_one_process_with_both_batches(tmp_path):
    """docs/training.md: without randomness that differs per rank (--dropout 0, a full softmax)
    and with sentences that each fill one BPTT window, `torchrun --nproc-per-node 2 -m elmo
    train --batch-size B` takes the steps of one process with --batch-size 2B: the same
    losses and weights up to float rounding."""
    words = "the a cat dog sees likes bird ball park home today again".split()
    rng = random.Random(0)
    corpus = tmp_path / "train.txt"  # 64 sentences of 4 words: 5 positions each
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(4)) + "\n"
                              for _ in range(64)), encoding="utf-8")
    common = ["train", "--train", str(corpus), "--preset", "tiny", "--dropout", "0",
              "--softmax", "full", "--unroll-steps", "5", "--max-steps", "6",
              "--log-every", "1", "--seed", "3", "--device", "cpu", "--quiet", "--threads", "1"]
    torchrun = Path(sys.executable).with_name("torchrun")
    subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", str(WORLD_SIZE), "-m",
                    "elmo", *common, "--batch-size", "4", "--out", str(tmp_path / "two")],
                   check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert main([*common, "--batch-size", str(4 * WORLD_SIZE), "--out", str(tmp_path / "one")]) \
        == 0

    two, one = (load_file(tmp_path / run / "model.safetensors") for run in ("two", "one"))
    assert two.keys() == one.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-4, atol=1e-5, msg=name)
    losses = [[m["train_loss"] for m in map(json.loads, (tmp_path / run / "metrics.jsonl")
                                            .read_text().splitlines()) if "train_loss" in m]
              for run in ("two", "one")]
    assert len(losses[0]) == 6 and np.allclose(losses[0], losses[1], rtol=1e-5, atol=0)
