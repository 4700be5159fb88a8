"""`elmo train --init-from DIR` where DIR is a run's --weights-copy (issue 70): with the
options that decide the batches and the schedule unchanged, it continues that run at the
recorded step, lr and data position; otherwise it is a new run from the copy's weights."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from elmo.errors import ModelFileError
from elmo.training.config import TrainConfig
from elmo.training.continuation import RUN_FACTS, SAME_RUN
from elmo.training.prepare import RunInfo
from elmo.training.saving import PROGRESS_NAME, CopyProgress
from elmo.training.trainer import Trainer
from tests.helpers.training import tiny_config, write_corpus

STEPS, SAVED_AT = 12, 8  # the run's length; the copy of a call killed after step 10
TOKENS_PER_STEP = 8 * 10  # tiny_config: 8 rows x 10 unroll steps, one process
TRAIN_STEP = Trainer._train_step


class Steps:
    """Records each step a run takes: its index, lr and batch (the next words' ids)."""

    def __init__(self, monkeypatch, crash_before: int | None = None) -> None:
        self.taken: list[tuple[int, float, torch.Tensor]] = []

        def spy(trainer, batch):
            if trainer.step == crash_before:
                raise KeyboardInterrupt
            n_tokens = TRAIN_STEP(trainer, batch)
            lr = trainer.optimizer.param_groups[-1]["lr"]
            self.taken.append((trainer.step, lr, batch.targets.clone()))
            return n_tokens

        monkeypatch.setattr(Trainer, "_train_step", spy)


def _config(train, **overrides) -> TrainConfig:
    """Every call's options: 12 steps of a slanted-triangular schedule (the lr differs at
    every step), a checkpoint and weights copy every 4."""
    return tiny_config(train, **{"max_steps": STEPS, "checkpoint_every": 4,
                                 "schedule": "slanted-triangular", **overrides})


def _train(config: TrainConfig, out, capsys) -> str:
    """Run `config` into `out`; what it logged."""
    capsys.readouterr()
    Trainer(config, out, progress=True).run()
    return capsys.readouterr().err


@pytest.fixture
def killed_call(tmp_path, monkeypatch):
    """The weights copy of a call killed as its step 11 began (its last save: step 8), and
    the training file. Its batches were read ahead by a thread: the copy keeps the position
    after the batches trained, not after those read."""
    train, _ = write_corpus(tmp_path)
    copy = tmp_path / "call-1" / "weights"
    Steps(monkeypatch, crash_before=10)
    with pytest.raises(KeyboardInterrupt):
        Trainer(_config(train, weights_copy=str(copy), prefetch=2), tmp_path / "run-1",
                progress=False).run()
    monkeypatch.undo()
    return copy, train


def test_the_next_call_continues_the_run_where_its_weights_copy_was_written(
        tmp_path, monkeypatch, killed_call, capsys):
    copy, train = killed_call
    progress = CopyProgress.read(copy)
    assert (progress.step, progress.tokens_seen) == (SAVED_AT, SAVED_AT * TOKENS_PER_STEP)

    uninterrupted = Steps(monkeypatch)
    Trainer(_config(train), tmp_path / "uninterrupted", progress=False).run()
    # The next call: the same options, but the model from the copy, a copy of its own, a
    # checkpoint interval and batches read ahead (none decides the batches or the schedule).
    continued = Steps(monkeypatch)
    log = _train(_config(train, init_from=str(copy), weights_copy=str(tmp_path / "copy-2"),
                         checkpoint_every=3, prefetch=1), tmp_path / "run-2", capsys)

    assert [step for step, _, _ in continued.taken] == list(range(SAVED_AT, STEPS))
    for (step, lr, targets), (_, want_lr, want_targets) in zip(
            continued.taken, uninterrupted.taken[SAVED_AT:], strict=True):
        assert lr == want_lr, step  # the schedule at that step, not at step 0
        assert torch.equal(targets, want_targets), step  # the batch it trains next
    assert continued.taken[0][1] != uninterrupted.taken[0][1]
    assert f"continuing the run of {copy} from step {SAVED_AT}" in log
    assert "the optimizer's state and the LSTM states carried across windows start fresh" in log
    assert "training 12 steps (0.52 epochs), from step 8" in log

    done = CopyProgress.read(tmp_path / "copy-2")
    assert (done.step, done.tokens_seen) == (STEPS, STEPS * TOKENS_PER_STEP)
    metrics = [json.loads(line) for line in
               (tmp_path / "run-2" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [10, 12]  # log_every 5: steps 9-10, 11-12


def test_another_option_starts_a_new_run_from_the_copy_and_says_which(
        tmp_path, monkeypatch, killed_call, capsys):
    copy, train = killed_call
    steps = Steps(monkeypatch)
    log = _train(_config(train, init_from=str(copy), lr=0.1), tmp_path / "other", capsys)
    assert steps.taken[0][0] == 0 and len(steps.taken) == STEPS
    assert (f"{copy} is the weights copy of another run (--lr: the default there, 0.1 here): "
            "a new run from its weights, from step 0") in log


def test_a_copy_without_progress_starts_a_new_run_from_its_weights(
        tmp_path, monkeypatch, killed_call, capsys):
    copy, train = killed_call
    (copy / PROGRESS_NAME).unlink()  # as copies were written before they recorded it
    steps = Steps(monkeypatch)
    log = _train(_config(train, init_from=str(copy), max_steps=2), tmp_path / "old", capsys)
    assert [step for step, _, _ in steps.taken] == [0, 1]
    assert "continuing" not in log and "another run" not in log


def test_with_validation_the_copy_is_the_best_model_and_its_perplexity_stays_the_best(
        tmp_path, monkeypatch):
    train, valid = write_corpus(tmp_path)
    copy = tmp_path / "weights"
    options = {"valid": str(valid), "eval_every": 4, "max_steps": 8}
    Steps(monkeypatch, crash_before=6)  # validated (the best so far) and saved at step 4
    with pytest.raises(KeyboardInterrupt):
        Trainer(_config(train, weights_copy=str(copy), **options), tmp_path / "run-1",
                progress=False).run()
    progress = CopyProgress.read(copy)
    assert (progress.step, progress.best_valid_ppl) == _validations(tmp_path / "run-1")[0]

    progress.best_valid_ppl = 1.0  # a best that the next validation cannot beat
    (copy / PROGRESS_NAME).write_text(json.dumps(dataclasses.asdict(progress)))
    steps = Steps(monkeypatch)
    Trainer(_config(train, init_from=str(copy), weights_copy=str(tmp_path / "copy-2"),
                    **options), tmp_path / "run-2", progress=False).run()
    assert [step for step, _, _ in steps.taken] == [4, 5, 6, 7]
    assert _validations(tmp_path / "run-2") == [(8, 1.0)]
    assert not (tmp_path / "copy-2").exists()  # not better than the best: nothing saved


def _validations(run_dir) -> list[tuple[int, float]]:
    """(step, best validation perplexity) of each validation in the run's metrics."""
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(m["step"], m["best_valid_ppl"]) for m in lines if "valid_ppl" in m]


@pytest.mark.parametrize("progress, message", [
    ({"step": -1, "tokens_seen": 0, "streams": [{}]}, "step and tokens_seen must be counts"),
    ({"step": 8, "streams": [{}]}, "is not the progress of a weights copy"),
    ({"step": 8, "tokens_seen": 640, "streams": [{"epoch": 0}]},
     "holds no data position of this run's rank 0"),
])
def test_a_broken_progress_file_is_refused_naming_it(tmp_path, killed_call, progress,
                                                      message):
    copy, train = killed_call
    (copy / PROGRESS_NAME).write_text(json.dumps(progress))
    with pytest.raises(ModelFileError, match=message) as raised:
        Trainer(_config(train, init_from=str(copy)), tmp_path / "run", progress=False).run()
    assert str(copy / PROGRESS_NAME) in str(raised.value)
    assert not (tmp_path / "run").exists()  # a start that fails leaves nothing behind


def test_the_options_compared_are_fields_of_run_json():
    options = {f.name for f in dataclasses.fields(TrainConfig)}
    facts = {f.name for f in dataclasses.fields(RunInfo)} - {"config"}
    assert set(RUN_FACTS) <= facts and len(set(SAME_RUN)) == len(SAME_RUN)
    assert set(SAME_RUN) - facts <= options
    # What a call changes freely: the model's source, the time budget, the bookkeeping.
    assert not {"preset", "init_from", "max_minutes", "weights_copy", "device",
                "checkpoint_every"} & set(SAME_RUN)
