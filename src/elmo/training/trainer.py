"""Trainer: pretrain or continue training a biLM, resumable and data-parallel.

One step reads the next BPTT window of every row (LSTM state carried across windows per row),
computes the mean loss of both directions with the tied softmax, backpropagates it scaled by
the window length (as bilm-tf), averages gradients over the ranks, clips them to a global
norm and takes an optimizer step.

The run directory (`--out`, held by rank 0 for the whole run: `elmo.runs.claim_run_folder`) is
written once training starts (after the corpus scan and the model set-up succeeded). It holds
`elmo-run.json` (the marker of a pretraining run), `run.json` (options, corpus counts), `vocab.txt`,
`checkpoint.safetensors` (everything needed to resume exactly, written by rank 0 every
`checkpoint_every` steps, `checkpoint_minutes` after the last one, and at the end),
`metrics.jsonl`, and the model in our format (`config.json` + `model.safetensors` with
`softmax.*` tensors): the best one on the validation data if given, else the last one (and,
with `weights_copy`, also in fp16 shards with the run's progress in a directory of its own,
which a new run may continue: `elmo.training.saving`, `elmo.training.continuation`).
Re-running the same command resumes from the checkpoint and ends with the same weights,
optimizer state and metrics as a run never interrupted, bit for bit, as long as it runs with
the same number of torch threads on the same device: every CPU kernel of a training step is
deterministic for a given thread count (see `BiLM.encode_tokens`, `SoftmaxHead.rows`).

A step reads nothing back from the device (`elmo.training.step`): its losses, gradient norm
and non-finite values are summed there and read every `log_every` steps and before anything is
validated or saved. A loss or gradient norm that is NaN or infinite stops the run there with
`TrainingDiverged`, which names the step it first happened at and the window in which it was
found; nothing is saved after the last checkpoint (the steps after the non-finite one have
been taken, on NaN weights, but the run stops before it writes anything).

On a GPU: a precision of `elmo.device.PRECISIONS` (bf16 autocast by default), the fastest
optimizer implementation (`elmo.training.optimizer`), batches prepared ahead by a thread in
pinned memory (`prefetch`, `elmo.training.stream.PreparedBatches`) with the sampled softmax's
candidates, and the whole step replayed from a CUDA graph (`cuda_graphs`,
`elmo.training.step.GraphedStep`). A checkpoint holds CPU tensors only and resumes on any
device.

A time budget (`max_minutes`) ends the run after the first step that finishes that many minutes
after this process's first step (the directory scan and model setup do not count; validation
and checkpoints inside the loop do). The run then logs, validates (if `valid` is given), writes
its checkpoint and model as at the end, and returns with `stopped_for_time`. The checkpoint is
not marked finished: the same command resumes it and trains for another budget, since a resumed
run counts only its own time. The learning-rate schedule still spans `max_steps` / `epochs`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from elmo.config import BiLMConfig
from elmo.data.corpus import expand_paths, iter_sentences
from elmo.device import PRECISIONS, default_precision
from elmo.errors import ElmoError
from elmo.modules.bilm import BiLM
from elmo.modules.language_model import BiLanguageModel
from elmo.optim.groups import (
    LayerGroup,
    discriminative_lrs,
    layer_groups,
    set_trainable,
    trainable_groups,
)
from elmo.optim.schedules import lr_multiplier
from elmo.runs import (
    CHECKPOINT_NAME,
    METRICS_NAME,
    PRETRAINING,
    MetricsLog,
    capture_rng,
    claim_run_folder,
    restore_rng,
)
from elmo.training.checkpoint import Checkpoint, RankState
from elmo.training.clock import RunClock
from elmo.training.config import TrainConfig
from elmo.training.continuation import Continuation, find_continuation
from elmo.training.distributed import World, init_world, resolve_device
from elmo.training.evaluate import PerplexityTotals, evaluate_perplexity
from elmo.training.model_init import build_language_model
from elmo.training.optimizer import build_optimizer, load_optimizer_state
from elmo.training.prepare import PreparedRun, RunInfo, prepare_run, start_run_dir
from elmo.training.reproducible import deterministic_algorithms, seed_everything, seed_new_run
from elmo.training.saving import CopyProgress, WeightsCopy, save_language_model
from elmo.training.step import GraphedStep, StatsReading, StepStats, TrainStep
from elmo.training.stream import BatchTensors, PreparedBatches, training_batches
from elmo.training.window import LogWindow
from elmo.vocab import Vocabulary


class TrainingDiverged(ElmoError):
    """The loss or the gradient norm became NaN or infinite; nothing was saved after the last
    checkpoint."""


@dataclass
class TrainResult:
    out_dir: Path
    step: int
    total_steps: int
    best_valid_ppl: float | None
    last_valid: PerplexityTotals | None
    stopped_early: bool
    stopped_for_time: bool = False


class Trainer:
    """Runs one training job in `out_dir` (a single process, or one rank of torchrun)."""

    def __init__(
        self, config: TrainConfig, out_dir: str | Path, world: World | None = None,
        progress: bool = True,
    ) -> None:
        self.config, self.out = config, Path(out_dir)
        self.world = world or World(device=resolve_device(config.device))
        self.precision = PRECISIONS[config.precision
                                    or default_precision("train", self.world.device)]
        self.verbose = progress and self.world.is_main
        self.metrics = MetricsLog(self.out / METRICS_NAME, "step")
        # Held until the run ends: rank 0's claim on the run directory, the batch thread.
        self._held = ExitStack()
        self._copy = None if config.weights_copy is None else WeightsCopy(
            Path(config.weights_copy), self.out, config.weights_copy_shard_mib, self._say)
        self._bar: tqdm | None = None
        # Built by `setup` from the prepared run, the same for the whole run:
        self.vocab: Vocabulary
        self.steps_per_epoch: int
        self.tokens_per_step: int  # rows x unroll steps x processes
        self.total_steps: int
        self.unfreeze_every: int | None  # steps between unfreezing layer groups, if gradual
        self.lm: BiLanguageModel
        self.groups: list[LayerGroup]
        self.base_lrs: list[float]  # of the groups, before the schedule's multiplier
        self.optimizer: torch.optim.Optimizer
        self.batches: PreparedBatches
        self.stats: StepStats  # the step's sums on the device
        self.train_step: Callable[[BatchTensors], None]  # a TrainStep, graphed on CUDA
        # Where training stands; `setup` sets it when resuming or continuing a weights copy:
        self.step = 0
        self.best: float | None = None  # the best validation perplexity
        self.bad_evals = 0  # validations since the best
        self.last_checkpoint: int | None = None  # its step
        self.resumed_window: dict[str, float] = {}  # the checkpoint's `LogWindow.state()`
        # Set by `train` at this process's first step:
        self.window: LogWindow  # the steps and throughput since the last log line
        self.clock = RunClock()  # the time budget, timed checkpoints, the metrics' minutes
        self._read_upto: int  # the last step whose sums were read back from the device

    # ---- setup ----------------------------------------------------------------------

    def _say(self, message: str) -> None:
        if self.verbose:
            (self._bar.write if self._bar else print)(f"elmo train: {message}", file=sys.stderr)

    def _prepare(self) -> PreparedRun:
        """Rank 0 claims the directory (held until the run ends), checks it and scans the
        corpus; every rank learns the outcome."""
        def prepare() -> dict[str, Any]:
            marked = self._held.enter_context(claim_run_folder(self.out, PRETRAINING))
            run = prepare_run(self.config, self.out, self.world.world_size, self._say,
                              marked=marked, progress=self.verbose)
            return {"info": run.info.to_dict(), "words": run.vocab.words, "fresh": run.fresh}

        shared = self.world.on_main(prepare, "prepare")
        return PreparedRun(RunInfo.from_dict(shared["info"]), Vocabulary(shared["words"]),
                           shared["fresh"])

    def _build(self, prepared: PreparedRun, ckpt: Checkpoint | None) -> None:
        """The model (a new one, or the checkpoint's), its optimizer, the batches of
        `prepared` and the step (graphed on CUDA)."""
        cfg, world, info = self.config, self.world, prepared.info
        self.vocab = prepared.vocab
        self.tokens_per_step = cfg.batch_size * cfg.unroll_steps * world.world_size
        self.steps_per_epoch = max(1, math.ceil(info.n_tokens / self.tokens_per_step))
        self.total_steps = cfg.max_steps or max(
            1, math.ceil(cfg.epochs * info.n_tokens / self.tokens_per_step)
        )
        self.unfreeze_every = (cfg.unfreeze_every or self.steps_per_epoch) \
            if cfg.gradual_unfreeze else None
        seed_everything(cfg.seed)  # the same initial weights on every rank
        if ckpt is None:
            lm = build_language_model(cfg, self.vocab)
        else:
            bilm = BiLM(BiLMConfig.from_dict(ckpt.model_config))
            lm = BiLanguageModel(bilm, len(self.vocab), cfg.softmax, cfg.num_samples)
            lm.load_state_dict(ckpt.model)
        self.lm = lm.to(world.device).train()
        self.lm.bilm.stateful = True

        self.groups = layer_groups(self.lm)
        self.base_lrs = discriminative_lrs(cfg.learning_rate, len(self.groups),
                                           cfg.discriminative_lr)
        param_groups = [{"params": g.params, "lr": lr, "name": g.name}
                        for g, lr in zip(self.groups, self.base_lrs, strict=True)]
        graphs = cfg.cuda_graphs and world.device.type == "cuda"
        self.optimizer = build_optimizer(cfg.optimizer, param_groups, cfg.learning_rate,
                                         world.device, capturable=graphs)
        self.batches = training_batches(cfg, info.train_files, self.vocab, self.lm, world)
        self._held.callback(self.batches.close)
        self.stats = StepStats(world.device)
        step = TrainStep(self.lm, self.optimizer, world, self.stats, cfg.clip_norm,
                         cfg.unroll_steps, self.precision)
        self.train_step = GraphedStep(step, self.batches.quiet) if graphs else step

    def _restore(self, ckpt: Checkpoint) -> None:
        """Where training stands, from the checkpoint: the optimizer, this rank's batches,
        LSTM states and random generators, the step, the best validation."""
        world = self.world
        if len(ckpt.ranks) != world.world_size:
            raise ElmoError(f"{self.out / CHECKPOINT_NAME} holds {len(ckpt.ranks)} rank(s), "
                            f"this run has {world.world_size}")
        load_optimizer_state(self.optimizer, ckpt.optimizer)
        mine = ckpt.ranks[world.rank]
        self.batches.load_state_dict(mine.stream, ckpt.step)
        if mine.lstm_states is not None:
            self.lm.bilm.carried_states = [
                (h.to(world.device), c.to(world.device)) for h, c in mine.lstm_states
            ]
        restore_rng(mine.rng)
        self.step = self.last_checkpoint = ckpt.step
        self.best, self.bad_evals = ckpt.best_valid_ppl, ckpt.bad_evals
        self.resumed_window = ckpt.log_window
        threads = torch.get_num_threads()
        if ckpt.threads is not None and ckpt.threads != threads:
            self._say(f"warning: the checkpoint was written with {ckpt.threads} torch threads, "
                      f"this process has {threads}: the run goes on, but not bit-identical to "
                      f"an uninterrupted one (--threads {ckpt.threads} would be)")

    def _start(self, start: Continuation | None) -> None:
        """A new run: at step 0, or where the run of its --init-from weights copy stood."""
        if start is not None:
            start.restore(self.batches, self.world.rank)
            self.step, self.best = start.progress.step, start.progress.best_valid_ppl
        seed_new_run(self.config.seed, self.world.rank, self.step)

    # ---- the run: setup, train, finish ---------------------------------------------

    def run(self) -> TrainResult:
        """Train to the end (or resume and finish); returns where it stopped. The run's
        precision holds throughout (its TF32 switches; its autocast in each step's forward
        pass), restored on exit."""
        with (deterministic_algorithms(self.config.deterministic), self.precision.switches(),
              self._held):
            resumed = self.setup()
            if self.step >= self.total_steps or self._patience_spent():
                self._say(f"the run in {self.out} is already finished (step {self.step:,})")
                return TrainResult(self.out, self.step, self.total_steps, self.best, None,
                                   self._patience_spent())
            return self.train(resumed)

    def setup(self) -> Checkpoint | None:
        """Prepare the run directory and corpus, build the model, its optimizer and batches,
        and restore where training stands; returns the checkpoint resumed from, if any."""
        prepared = self._prepare()
        ckpt_path = self.out / CHECKPOINT_NAME
        ckpt = Checkpoint.load(ckpt_path) if ckpt_path.exists() else None
        self._build(prepared, ckpt)
        if ckpt is None:
            self._start(find_continuation(prepared.info, self._say))
        else:
            self._restore(ckpt)
        if prepared.fresh:  # everything that could fail before training did not
            self.world.on_main(lambda: start_run_dir(self.out, prepared), "write the run directory")
        if self.world.is_main:  # forget what a killed run logged after its last checkpoint
            self.metrics.truncate_after(self.step)
        return ckpt

    def train(self, resumed: Checkpoint | None) -> TrainResult:
        """Train from `self.step` until the end, the time budget or early stopping."""
        cfg = self.config
        if resumed is not None:
            self._say(f"resuming from step {resumed.step:,} of {self.total_steps:,}")
        else:
            start = f", from step {self.step:,}" if self.step else ""
            self._say(f"training {self.total_steps:,} steps "
                      f"({self.total_steps / self.steps_per_epoch:.2f} epochs){start}")
        if not self.precision.applies_on(self.world.device):
            self._say(f"--precision {self.precision.name} has no effect on "
                      f"{self.world.device.type}: the run computes in fp32")
        last_valid = None
        self._bar = tqdm(total=self.total_steps, initial=self.step, desc="training",
                         unit="step", disable=not self.verbose, dynamic_ncols=True)
        self.stats.steps.fill_(self.step)
        self._read_upto = self.step  # the last step read back from the device
        self.window = LogWindow(self.stats, self.world.is_main, **self.resumed_window)
        self.clock.start()
        stopped_early = out_of_time = False
        with self._bar:
            while not (stopped_early or out_of_time) and self.step < self.total_steps:
                self.window.add(self._train_step(next(self.batches)))
                self.step += 1
                self._bar.update(1)
                end = self.step >= self.total_steps
                out_of_time, checkpoint_due = self.clock.due(cfg, self.world, end)
                stop = end or out_of_time
                log = self.step % cfg.log_every == 0 or stop
                validate = cfg.valid is not None and (self.step % cfg.eval_every == 0 or stop)
                save = stop or checkpoint_due or self.step % cfg.checkpoint_every == 0
                if log or validate or save:  # read the device's sums; raise if diverged
                    self._read_window()
                if log:
                    self._log_train(self.window)
                    self.window = LogWindow(self.stats, self.world.is_main)
                if validate:
                    with self.window.paused():  # tokens/s counts training time only
                        last_valid = self._evaluate()
                    stopped_early = self._patience_spent()
                if save or stopped_early:
                    self._checkpoint(finished=end or stopped_early)
        self._bar = None
        return self.finish(last_valid, stopped_early, out_of_time)

    def finish(self, last_valid: PerplexityTotals | None, stopped_early: bool,
               out_of_time: bool) -> TrainResult:
        """Say why the run stopped; where it stands."""
        if out_of_time:
            self._say(f"stopped at step {self.step:,} of {self.total_steps:,}: the time budget "
                      f"of {self.config.max_minutes:g} minutes is spent (run the same command to "
                      "train for another budget)")
        if stopped_early:
            self._say(f"stopped early at step {self.step:,}: no better validation perplexity "
                      f"in {self.bad_evals} evaluations")
        self._say(f"done: the model is in {self.out}")
        return TrainResult(self.out, self.step, self.total_steps, self.best, last_valid,
                           stopped_early, out_of_time)

    def _patience_spent(self) -> bool:
        patience = self.config.early_stopping_patience
        return patience is not None and self.bad_evals >= patience

    def _train_step(self, batch: BatchTensors) -> int:
        """One optimizer step, nothing read back from the device; returns the number of
        tokens this rank predicted (per direction)."""
        cfg = self.config
        set_trainable(self.groups, trainable_groups(self.step, len(self.groups),
                                                    self.unfreeze_every))
        multiplier = lr_multiplier(cfg.schedule, self.step, self.total_steps, cfg.warmup_frac)
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base_lr * multiplier
        self.train_step(batch)
        return batch.n_tokens

    def _read_window(self) -> None:
        """Read the window's sums back from the device into `self.window`; raise
        TrainingDiverged if a step since the last reading had a non-finite loss or norm."""
        reading = self.stats.read(self.world, self.window.tokens)
        if reading.bad_step is not None:
            raise TrainingDiverged(self._diverged_message(reading))
        self.window.reading, self._read_upto = reading, self.step

    def _diverged_message(self, reading: StatsReading) -> str:
        loss_f, loss_b, norm = reading.bad_values
        saved = (f"the checkpoint of step {self.last_checkpoint:,} in {self.out} is intact"
                 if self.last_checkpoint is not None else "no checkpoint had been written yet")
        return (f"training diverged at step {reading.bad_step:,}: forward loss {loss_f}, "
                f"backward loss {loss_b}, gradient norm {norm} (found when steps "
                f"{self._read_upto + 1:,}-{self.step:,} were read back from the device). Nothing "
                f"was saved after it; {saved}. "
                "Lower --lr (or --clip-norm) and run the same command to resume from it.")

    def _log_train(self, window: LogWindow) -> None:
        loss_f, loss_b, tokens_per_s = window.summary()
        lr = self.optimizer.param_groups[-1]["lr"]
        record = {
            "step": self.step, "epoch": round(self.step / self.steps_per_epoch, 4),
            "train_loss": 0.5 * (loss_f + loss_b),
            "train_ppl_forward": math.exp(loss_f), "train_ppl_backward": math.exp(loss_b),
            "train_ppl": math.exp(0.5 * (loss_f + loss_b)),
            "lr": lr, "tokens_per_s": round(tokens_per_s, 1), "minutes": self.clock.minutes(),
        }
        if self.world.is_main:
            self.metrics.append(record)
        self._bar.set_postfix(loss=f"{record['train_loss']:.3f}",
                              ppl=f"{record['train_ppl']:.1f}", tok_s=f"{tokens_per_s:,.0f}",
                              refresh=False)

    def _evaluate(self) -> PerplexityTotals:
        """Validation perplexity (each rank scores its share); keeps the best model."""
        cfg, world = self.config, self.world
        sentences = iter_sentences(expand_paths([cfg.valid]), cfg.tokenizer, rank=world.rank,
                                   world_size=world.world_size, input_format=cfg.input_format)
        with PRECISIONS["fp32"].computing(world.device):
            totals = evaluate_perplexity(self.lm, sentences, self.vocab, cfg.batch_size)
        sums = world.sum(torch.tensor(
            [totals.nll_forward, totals.nll_backward, totals.n_tokens],
            dtype=torch.float64, device=world.device,
        )).tolist()
        totals = PerplexityTotals(sums[0], sums[1], int(sums[2]))
        if self.best is None or totals.average < self.best:
            self.best, self.bad_evals = totals.average, 0
            # Each rank's data position, for the weights copy only (the same on every rank).
            streams = [] if self._copy is None else world.gather(self.batches.state_dict())
            if world.is_main:
                self._save_model(streams)
        else:
            self.bad_evals += 1
        if world.is_main:
            self.metrics.append({
                "step": self.step, "epoch": round(self.step / self.steps_per_epoch, 4),
                "valid_ppl_forward": totals.forward, "valid_ppl_backward": totals.backward,
                "valid_ppl": totals.average, "best_valid_ppl": self.best,
                "minutes": self.clock.minutes(),
            })
        self._say(f"step {self.step:,}: validation perplexity {totals.average:.2f} "
                  f"(forward {totals.forward:.2f}, backward {totals.backward:.2f})")
        return totals

    def _save_model(self, streams: list[dict[str, Any]]) -> None:
        """The model into the run directory; into the weights copy, if asked, at `streams`."""
        save_language_model(self.lm, self.out)
        if self._copy is not None:
            self._copy.write(self.lm, CopyProgress(
                self.step, self.step * self.tokens_per_step, streams, self.best))

    def _checkpoint(self, finished: bool) -> None:
        """Write the checkpoint (and, without validation data, the model first: a run killed
        between the two redoes the steps since the last checkpoint and writes both again)."""
        states = self.lm.bilm.carried_states
        mine = RankState(
            stream=self.batches.state_dict(),
            lstm_states=None if states is None else [(h.cpu(), c.cpu()) for h, c in states],
            rng=capture_rng(),
        )
        ranks = self.world.gather(mine)
        if not self.world.same_on_all_ranks(self.lm.parameters()):
            raise ElmoError(f"step {self.step}: the model replicas differ between ranks")
        if self.world.is_main:
            if self.config.valid is None:
                self._save_model([rank.stream for rank in ranks])
            Checkpoint(
                step=self.step, model=self.lm.state_dict(),
                optimizer=self.optimizer.state_dict(), ranks=ranks,
                best_valid_ppl=self.best, bad_evals=self.bad_evals, finished=finished,
                model_config=self.lm.bilm.config.to_dict(), log_window=self.window.state(),
                threads=torch.get_num_threads(),
            ).save(self.out / CHECKPOINT_NAME)
        self.last_checkpoint = self.step
        self.clock.checkpointed()


def train(config: TrainConfig, out_dir: str | Path, progress: bool = True) -> TrainResult:
    """Run `config` in `out_dir`: alone, or as one rank when launched by torchrun."""
    world = init_world(config.device)
    try:
        return Trainer(config, out_dir, world, progress).run()
    finally:
        world.close()
