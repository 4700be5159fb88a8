"""Training is bit-for-bit reproducible with 2 threads (issue 8): the same backward pass twice,
two runs of the same command, and a run killed with SIGKILL and re-run all agree bitwise.

The rest of the suite runs with 1 thread (conftest); these tests set 2 threads themselves,
because the kernels that differ from run to run (atomic adds) only run in parallel there.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from elmo.chars import ByteIndexer
from elmo.cli import main
from elmo.config import BiLMConfig
from elmo.data.batching import BPTTConfig
from elmo.modules.bilm import BiLM
from elmo.modules.language_model import BiLanguageModel
from elmo.runs import CHECKPOINT_NAME, read_checkpoint_meta
from elmo.training.stream import BatchEncoder, CandidateSampler, TrainStream
from elmo.training.trainer import Trainer
from elmo.vocab import Vocabulary
from tests.helpers.killing import killed_at
from tests.helpers.training import assert_identical, run_files, train_args, write_corpus

# Large enough batches that the parallel CPU kernels run: an index backward of at least
# 32,768 elements (torch's grain size) uses atomic adds when there are 2 threads.
BATCH = ["--batch-size", "64", "--unroll-steps", "20"]


@contextmanager
def threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("softmax", ["sampled", "full"])
def test_a_training_backward_pass_is_bitwise_repeatable_with_2_threads(tmp_path, softmax):
    """Gradients of every parameter, twice from the same batch, seed and weights."""
    train, _ = write_corpus(tmp_path, n_train=400)
    vocab = Vocabulary.build(line.split() for line in train.read_text().splitlines())
    torch.manual_seed(0)
    lm = BiLanguageModel(BiLM(BiLMConfig.preset("tiny", vocab_size=len(vocab))), len(vocab),
                         softmax, num_samples=12).train()
    batch = next(TrainStream([train], "whitespace", vocab, BPTTConfig(64, 20)))
    sampler = CandidateSampler(len(vocab), 12, seed=0) if softmax == "sampled" else None
    tensors = BatchEncoder(vocab, ByteIndexer(50), sampler=sampler)(batch)

    def gradients() -> dict[str, torch.Tensor]:
        torch.manual_seed(1)  # the same dropout masks
        lm.zero_grad(set_to_none=True)
        lm(tensors.tokens, tensors.targets, tensors.mask, tensors.candidates).total.backward()
        return {name: p.grad.clone() for name, p in lm.named_parameters()}

    with threads(2):
        first = gradients()
        for _ in range(3):
            again = gradients()
            differ = [name for name in first if not torch.equal(first[name], again[name])]
            assert not differ


@pytest.mark.parametrize("n_threads", [1, 2])
def test_two_runs_of_the_same_command_are_bitwise_identical(tmp_path, n_threads):
    train, valid = write_corpus(tmp_path)
    extra = [*BATCH, "--max-steps", "8", "--checkpoint-every", "4", "--eval-every", "4",
             "--log-every", "3", "--softmax", "sampled", "--num-samples", "12", "--seed", "7"]
    with threads(n_threads):
        for name in ("a", "b"):
            assert main(train_args(train, valid, tmp_path / name, *extra)) == 0
    assert_identical(run_files(tmp_path / "b"), run_files(tmp_path / "a"))


# 200 lines are 3 batches of 64 x 20 an epoch: checkpoints every 3 steps end an epoch, every 4
# they fall in its middle, with sentences carried over in the rows.
@pytest.mark.parametrize("n_threads, prefetch, every", [(1, 0, 3), (2, 3, 4)],
                         ids=["1-thread-epoch-ends", "2-threads-prefetch-3-mid-epoch"])
def test_sigkill_at_any_point_then_the_same_command_ends_bitwise_identical(tmp_path, n_threads,
                                                                           prefetch, every):
    """A run killed with SIGKILL (1) before its first checkpoint, and (2) after its second,
    re-run each time, ends with exactly the weights, optimizer state, RNG states and metrics
    of a run never interrupted (sampled softmax and dropout on, so the RNG states matter;
    checkpoints between two metrics lines). With `--prefetch`, batches read ahead when the
    run was killed are read again. The kills are the run's own, just before it writes its
    1st and its 3rd checkpoint (tests/helpers/killing.py)."""
    train, valid = write_corpus(tmp_path)
    extra = [*BATCH, "--max-steps", "12", "--checkpoint-every", every, "--eval-every", "7",
             "--log-every", "5", "--softmax", "sampled", "--num-samples", "12"]
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    args = train_args(train, valid, killed, *extra, "--prefetch", prefetch)

    def checkpoint_step() -> int:
        path = killed / CHECKPOINT_NAME
        return read_checkpoint_meta(path)["step"] if path.exists() else 0

    for n, step in ((1, 0), (3, 2 * every)):
        assert killed_at("checkpoint", n, "elmo.cli:main", args, threads=n_threads) \
            == -signal.SIGKILL
        assert checkpoint_step() == step
    rows = read_checkpoint_meta(killed / CHECKPOINT_NAME)["ranks"][0]["stream"]["batcher"]["rows"]
    assert any(rows) == (every == 4)  # sentences carried over in the rows, or an epoch's end
    with threads(n_threads):
        assert main(args) == 0  # the same command resumes and finishes
        assert main(train_args(train, valid, reference, *extra)) == 0
    resumed = run_files(killed)
    assert resumed["meta"]["step"] == 12 and resumed["meta"]["finished"]
    assert_identical(resumed, run_files(reference))


def test_deterministic_flag_is_accepted_recorded_and_restored(tmp_path, monkeypatch):
    """`--deterministic` turns torch's deterministic mode on for the run only; on CPU the
    result is the same as without it (every kernel of a step is deterministic already)."""
    train, _ = write_corpus(tmp_path)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    seen, real_step = [], Trainer._train_step

    def spy(self, batch):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "_train_step", spy)
    extra = ["--max-steps", "3", "--softmax", "sampled", "--num-samples", "12"]
    assert main(train_args(train, None, tmp_path / "on", *extra, "--deterministic")) == 0
    assert seen == [True] * 3 and not torch.are_deterministic_algorithms_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert json.loads((tmp_path / "on" / "run.json").read_text())["config"]["deterministic"]
    assert main(train_args(train, None, tmp_path / "off", *extra)) == 0
    assert seen[3:] == [False] * 3
    on, off = run_files(tmp_path / "on"), run_files(tmp_path / "off")
    assert_identical({k: v for k, v in on.items() if k != "meta"},
                     {k: v for k, v in off.items() if k != "meta"})


def test_resuming_with_another_thread_count_says_so(tmp_path, capsys):
    train, _ = write_corpus(tmp_path)
    args = ["train", "--train", str(train), "--out", str(tmp_path / "run"), "--preset", "tiny",
            "--batch-size", "4", "--unroll-steps", "5"]
    with threads(1):
        assert main([*args, "--max-steps", "1", "--quiet"]) == 0
    assert read_checkpoint_meta(tmp_path / "run" / CHECKPOINT_NAME)["threads"] == 1
    capsys.readouterr()
    with threads(2):
        assert main([*args, "--max-steps", "2"]) == 0  # --max-steps may change on resume
    assert "written with 1 torch threads, this process has 2" in capsys.readouterr().err
