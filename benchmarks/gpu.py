"""Correctness, speed and memory on a GPU (or, for a smoke run, the CPU), in one command.

Made for a lent GPU's few minutes: every measurement is guarded (an error is recorded, the
run goes on), the most important come first, and the JSON and the markdown table are written
after each section, so what was measured is kept when `--minutes` runs out or the call ends.

1. The card: name, versions, memory, and its matmul rates measured now (fp32 with TF32 off,
   TF32, bf16; square products timed with CUDA events).
2. Correctness: the official fixtures on the device against TensorFlow's numbers (stateful,
   as their README says); the device against the CPU in fp32 with TF32 off, on `default` and
   on `original`-sized random weights, every layer, with CUDA graphs and eagerly; the TF32
   and bf16 errors; batch invariance on the device (each sentence alone vs in a batch).
3. Speed: `Embedder` tokens/s (the library `elmo embed` runs, in memory, no file) for `small`
   and `original` at several token budgets, fp32 / TF32 / bf16, graphs and eager; the first
   pass (cold word cache, graph capture) and a second one (cold word cache, graphs warm); a
   breakdown of one batch (char-CNN, LSTMs eager and graphed, host-side preparation). Each
   also as a fraction of the card's limit: its measured matmul rate over a token's FLOPs.
   Pretraining (`elmo.training.Trainer`, the training section: `--skip correctness
   embedding memory` runs it alone): `original` and `small` at 128 and 512 rows, bf16 and
   TF32, the step replayed from a CUDA graph or eager, the LSTM clipped (reference back end,
   or the fused cell's, at 512, 1,024 and 2,048 rows) or not (cuDNN): tokens/s, the
   fraction of the limit, the device's busy fraction (torch.profiler's kernel time over the
   wall time of a few steps), the milliseconds a step takes and those the training thread
   spends on the CPU, the loss.
4. Memory: peak device memory per token budget, the largest budget that fits (a linear fit of
   peak against budget, over the free memory), a 10,000-token input embedded.
5. ELMo or BERT: benchmarks/elmo_vs_bert.py's table on the device (ELMo and Hugging Face BERT
   in fp32, TF32 and bf16 on CoNLL-2003 and MSRA sentences; needs transformers and tokenizers,
   and conll2003/ and msra-ner/ in `--data` or ../shared/data).

    python benchmarks/gpu.py --out OUT_DIR [--minutes 3] [--data DIR] [--fixtures DIR]
    python benchmarks/gpu.py --device cpu --quick --out OUT_DIR    # smoke run (tests)
    python benchmarks/gpu.py --out OUT_DIR --skip correctness embedding memory training
        # ELMo or BERT alone

`--data` holds `wikitext2_test_1000.txt` (or WikiText-2's `test.txt`) for embedding and
WikiText-2's `train.txt.gz` for training speed; default: ../shared/bench and
../shared/data/wikitext-2. `--fixtures`: ../shared/fixtures/bilm-tf by default.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import elmo_vs_bert
import numpy as np
import torch
from common import (
    SHARED,
    TimedTrainer,
    build_vocab,
    forward_flops_per_token,
    head_lines,
    open_text,
    random_model,
    training_flops_per_token,
)

from elmo import batch_to_ids, load_bilm_tf
from elmo.device import computing_in, tf32_allowed
from elmo.embed import Embedder
from elmo.loading import load_model
from elmo.modules.bilm import BiLM, add_boundaries
from elmo.modules.lstm import STEP_LOOPS
from elmo.modules.lstm_backends import BACKENDS
from elmo.training import TrainConfig
from elmo.training.step import GraphedStep

FIXTURES = {  # folder under fixtures/bilm-tf -> its sentences file
    "bilm-tf": ("bilm-tf_tests_fixtures/model", "lm_embeddings_sentences.json"),
    "allennlp": ("allennlp_test_fixtures_elmo", "sentences.json"),
}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Report:
    """Results by section, written as JSON and markdown after every section."""

    def __init__(self, out: Path, deadline: float) -> None:
        self.out, self.deadline = out, deadline
        self.data: dict[str, Any] = {"errors": []}
        out.mkdir(parents=True, exist_ok=True)

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def guarded(self, what: str, work: Callable[[], Any]) -> Any:
        """work(), or None with the error recorded; skipped once the time is up."""
        if self.time_left() <= 0:
            self.data.setdefault("skipped_for_time", []).append(what)
            return None
        start = time.monotonic()
        try:
            return work()
        except Exception as err:  # one failed measurement must not lose the others
            print(f"FAILED {what}: {type(err).__name__}: {err}", file=sys.stderr)
            traceback.print_exc()
            self.data["errors"].append({"what": what, "error": f"{type(err).__name__}: {err}"})
            return None
        finally:
            self.data.setdefault("seconds_each", {})[what] = round(time.monotonic() - start, 2)

    def write(self) -> None:
        (self.out / "gpu.json").write_text(json.dumps(self.data, indent=2) + "\n")
        (self.out / "gpu.md").write_text(markdown(self.data))


# ---- the card ------------------------------------------------------------------------------


def matmul_rate(device: torch.device, dtype: torch.dtype, tf32: bool, size: int) -> float:
    """Median TFLOP/s of a square product on random data (CUDA events; CPU: wall clock)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    times = []
    with tf32_allowed(tf32):
        for i in range(12):
            synchronize(device)
            start = time.perf_counter()
            a @ b
            synchronize(device)
            if i >= 2:
                times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times) / 1e12


def card(device: torch.device, quick: bool) -> dict[str, Any]:
    info: dict[str, Any] = {"device": str(device), "torch": torch.__version__,
                            "cuda": torch.version.cuda,
                            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        free, total = torch.cuda.mem_get_info(device)
        info.update(name=props.name, memory_gib=round(total / 2**30, 1),
                    free_gib=round(free / 2**30, 1), multiprocessors=props.multi_processor_count,
                    cudnn=torch.backends.cudnn.version())
    size = 256 if quick else 8192 if device.type == "cuda" else 2048
    info["matmul_tflops"] = {
        "fp32": matmul_rate(device, torch.float32, False, size),
        "tf32": matmul_rate(device, torch.float32, True, size),
        "bf16": matmul_rate(device, torch.bfloat16, False, size),
    }
    return info


# ---- data ----------------------------------------------------------------------------------


def sentences_of(path: Path, max_tokens: int) -> list[list[str]]:
    """Sentences of a text file (a long line is cut after each '.'), up to max_tokens."""
    sentences, total = [], 0
    with open_text(path) as f:
        for line in f:
            current: list[str] = []
            for word in line.split():
                current.append(word)
                if word == "." and len(current) > 3:
                    sentences.append(current)
                    total, current = total + len(current), []
            if current:
                sentences.append(current)
                total += len(current)
            if total >= max_tokens:
                break
    return sentences


# ---- correctness ---------------------------------------------------------------------------


def layers_on(model: BiLM, sentences: list[list[str]], device: torch.device, mode: str,
              graphs: bool) -> torch.Tensor:
    model.to(device).cuda_graphs = graphs
    with torch.inference_mode(), computing_in(mode, device):
        return model(batch_to_ids(sentences).to(device)).layers.float().cpu()


def layer_errors(got: torch.Tensor, expected: torch.Tensor) -> dict[str, list[float]]:
    """Per layer: max |got - expected| and ||got - expected|| / ||expected||."""
    diff = (got - expected).double()
    return {"max_abs": [float(d.abs().max()) for d in diff],
            "relative": [float(d.norm() / e.double().norm()) for d, e in zip(diff, expected,
                                                                             strict=True)]}


def fixture_errors(root: Path, device: torch.device) -> dict[str, Any]:
    """The official fixtures on `device`, stateful as TensorFlow ran them: max |ours - TF|."""
    import h5py

    results = {}
    for name, (folder, sentences_file) in FIXTURES.items():
        path = root / folder
        model = load_bilm_tf(path / "options.json", path / "lm_weights.hdf5").to(device)
        model.stateful = True
        sentences = json.loads((path / sentences_file).read_text())
        expected = [h5py.File(path / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
        worst = 0.0
        with torch.inference_mode(), computing_in("fp32", device):
            for i in range(10):
                batch = [sentences[k][i].split() for k in range(3)]
                top = model(batch_to_ids(batch).to(device)).layers[-1].cpu().numpy()
                for k, tokens in enumerate(batch):
                    data = expected[k][str(i)][...]
                    want = np.concatenate([data[0], data[1]], axis=-1)
                    worst = max(worst, float(np.abs(top[k, : len(tokens)] - want).max()))
        results[name] = {"max_abs_vs_tensorflow": worst, "passes_1e-5": worst <= 1e-5}
    return results


def device_vs_cpu(model: BiLM, sentences: list[list[str]], device: torch.device
                  ) -> dict[str, Any]:
    reference = layers_on(model, sentences, torch.device("cpu"), "fp32", False)
    results = {}
    for mode, graphs in (("fp32", True), ("fp32", False), ("tf32", True), ("bf16", True)):
        got = layers_on(model, sentences, device, mode, graphs)
        results[f"{mode} {'graphs' if graphs else 'eager'}"] = layer_errors(got, reference)
    model.cpu()
    return results


def batch_invariance(model: BiLM, sentences: list[list[str]], device: torch.device) -> float:
    """Max |layers of a sentence alone - the same sentence in the batch| on the device."""
    batch = layers_on(model, sentences, device, "fp32", True)
    worst = 0.0
    for b, sentence in enumerate(sentences):
        alone = layers_on(model, [sentence], device, "fp32", True)
        worst = max(worst, float((alone[:, 0] - batch[:, b, : len(sentence)]).abs().max()))
    model.cpu()
    return worst


def correctness(report: Report, device: torch.device, fixtures: Path, texts: list[list[str]],
                quick: bool) -> None:
    data = report.data.setdefault("correctness", {})
    if fixtures.is_dir():
        data["fixtures"] = report.guarded("fixtures", lambda: fixture_errors(fixtures, device))
    else:
        data["fixtures"] = f"not found at {fixtures}"
    sample = texts[: 8 if quick else 32]
    models = {"default": lambda: load_model("default").bilm,
              "original": lambda: random_model("tiny" if quick else "original")}
    for name, make in models.items():
        data[f"{name} device vs cpu"] = report.guarded(
            f"{name} device vs cpu", lambda make=make: device_vs_cpu(make(), sample, device))
    data["batch invariance max_abs"] = report.guarded(
        "batch invariance", lambda: batch_invariance(load_model("default").bilm, texts[:8],
                                                     device))
    report.write()


# ---- embedding speed and memory -------------------------------------------------------------


def embed_run(model: BiLM, sentences: list[list[str]], device: torch.device, budget: int,
              mode: str, graphs: bool) -> dict[str, Any]:
    """Two passes of `Embedder.embed_sentences` (each with a cold word cache): tokens/s of
    the first (graph capture included) and the second, and the peak device memory."""
    model.cuda_graphs = graphs
    tokens = sum(len(s) for s in sentences)
    seconds = []
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    with computing_in(mode, device):
        for _ in range(2):
            embedder = Embedder(model, device=device, batch_size=budget, max_tokens=budget)
            synchronize(device)
            start = time.perf_counter()
            for _ in embedder.iter_embeddings(sentences):
                pass
            synchronize(device)
            seconds.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return {"tokens": tokens, "first_pass_tokens_per_s": tokens / seconds[0],
            "tokens_per_s": tokens / seconds[1], "peak_memory_mb": peak and peak / 2**20}


def embed_grid(budgets: list[int]) -> list[tuple[int, str, bool]]:
    """(budget, precision, graphs) in order of importance."""
    middle = budgets[len(budgets) // 2]
    runs = [(b, "tf32", True) for b in budgets]
    runs += [(middle, "bf16", True), (middle, "fp32", True), (middle, "tf32", False),
             (middle, "fp32", False), (middle, "bf16", False)]
    return runs


def breakdown(model: BiLM, sentences: list[list[str]], device: torch.device, budget: int
              ) -> dict[str, float]:
    """Milliseconds of one batch of about `budget` tokens, part by part (TF32)."""
    batch, used = [], 0
    for s in sentences:
        if used + len(s) + 2 > budget:
            break
        batch.append(s)
        used += len(s) + 2

    def timed(work: Callable[[], Any], repeats: int = 5) -> float:
        work()
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            work()
        synchronize(device)
        return 1000 * (time.perf_counter() - start) / repeats

    result: dict[str, float] = {"sentences": len(batch), "tokens": used}
    with torch.inference_mode(), computing_in("tf32", device):
        result["host: batch_to_ids + copy"] = timed(lambda: batch_to_ids(batch).to(device))
        ids = batch_to_ids(batch).to(device)
        mask = (ids > 0).any(-1)
        lengths = mask.sum(1)
        wrapped = add_boundaries(ids, lengths, model.bos_ids, model.eos_ids)
        result["char-CNN (distinct tokens)"] = timed(lambda: model.encode_tokens(wrapped))
        tokens = model.encode_tokens(wrapped)
        for graphs in (False, True):
            model.cuda_graphs = graphs
            result[f"LSTMs + layers, {'graphs' if graphs else 'eager'}"] = timed(
                lambda: model.contextualize(tokens, lengths + 2))
        layers = model.contextualize(tokens, lengths + 2).layers
        result["device -> host copy of the layers"] = timed(lambda: layers.cpu())
    return result


def embedding(report: Report, device: torch.device, texts: list[list[str]],
              presets: list[str], budgets: list[int]) -> None:
    for preset in presets:
        embed_preset(report, random_model(preset).to(device), device, texts, preset, budgets)


def embed_preset(report: Report, model: BiLM, device: torch.device, texts: list[list[str]],
                 preset: str, budgets: list[int]) -> None:
    rows = report.data.setdefault("embedding", [])
    limits = report.data["card"]["matmul_tflops"]
    flops = forward_flops_per_token(model.config)
    for budget, mode, graphs in embed_grid(budgets):
        result = report.guarded(
            f"embed {preset} {budget} {mode} {'graphs' if graphs else 'eager'}",
            lambda b=budget, m=mode, g=graphs: embed_run(model, texts, device, b, m, g))
        if result is None:
            continue
        limit = limits[mode] * 1e12 / flops
        rows.append({"preset": preset, "budget": budget, "precision": mode, "graphs": graphs,
                     **result, "limit_tokens_per_s": limit,
                     "fraction_of_limit": result["tokens_per_s"] / limit})
        report.write()
    report.data.setdefault("breakdown", {})[preset] = report.guarded(
        f"breakdown {preset}", lambda: breakdown(model, texts, device, budgets[-1]))
    report.write()


def memory(report: Report, device: torch.device, texts: list[list[str]], quick: bool) -> None:
    """The largest budget that fits (from the embedding rows' peaks) and a 10,000-token input."""
    data = report.data.setdefault("memory", {})
    rows = [r for r in report.data.get("embedding", []) if r["preset"] == "original"
            and r["precision"] == "tf32" and r["graphs"] and r["peak_memory_mb"]]
    if len(rows) >= 2 and device.type == "cuda":
        slope, intercept = np.polyfit([r["budget"] for r in rows],
                                      [r["peak_memory_mb"] for r in rows], 1)
        total = torch.cuda.mem_get_info(device)[1] / 2**20
        data["original_mb_per_budget_token"] = float(slope)
        data["original_largest_budget_estimate"] = int((total - intercept) / slope)
    words = [w for s in texts for w in s]
    length = 200 if quick else 10_000
    long_sentence = (words * (length // max(len(words), 1) + 1))[:length]

    def embed_long() -> dict[str, Any]:
        model = random_model("tiny" if quick else "original").to(device)
        return {"tokens": length, **embed_run(model, [long_sentence], device, 4096, "tf32",
                                              True)}

    data["long_input"] = report.guarded("10,000-token input", embed_long)
    report.write()


# ---- pretraining speed ---------------------------------------------------------------------


@dataclass(frozen=True)
class TrainRun:
    """One pretraining measurement, `PRESET:ROWS:PRECISION[:OPTION...]` on the command line.

    Options: `eager` (no CUDA graph of the step), `noclip` (an unclipped LSTM, which trains
    through the cudnn back end), a back end of `BACKENDS` forced (`reference` even without
    clips, `fused` for the fused clipped cell), a step loop (`packed`, `masked`)."""

    preset: str
    batch_size: int
    precision: str
    graphs: bool = True
    clip: bool = True
    backend: str | None = None  # forced LSTM back end (None: choose_backend's)
    step_loop: str | None = None

    @classmethod
    def parse(cls, text: str) -> TrainRun:
        preset, batch, precision, *options = text.split(":")
        unknown = set(options) - {"eager", "noclip", *BACKENDS, *STEP_LOOPS}
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown options {sorted(unknown)} in {text}")
        backends = [o for o in options if o in BACKENDS]
        loops = [o for o in options if o in STEP_LOOPS]
        return cls(preset, int(batch), precision, "eager" not in options,
                   "noclip" not in options, backends[0] if backends else None,
                   loops[0] if loops else None)

    @property
    def lstm(self) -> str:
        """The LSTM back end the run trains through."""
        return self.backend or ("reference" if self.clip else "cudnn")

    @property
    def name(self) -> str:
        return " ".join(str(v) for v in (
            self.preset, self.batch_size, self.precision,
            "graphs" if self.graphs else "eager", self.lstm, self.step_loop,
            None if self.clip else "noclip") if v)


# In order of importance (each about 5-15 s on an H100/H200): `original` at 512 rows in
# bf16, graphs and cuDNN on and off, the clipped cell fused (`FUSED_CELL_RUNS`), then TF32,
# `small`, 128 rows.
FUSED_CELL_RUNS = [  # clipped `original`, eager and fused cell, 512 to 2,048 rows
    "original:512:bf16", "original:512:bf16:fused", "original:512:bf16:fused:eager",
    "original:1024:bf16", "original:1024:bf16:fused", "original:2048:bf16",
    "original:2048:bf16:fused",
]
DEFAULT_TRAIN_RUNS = [
    "original:512:bf16", "original:512:bf16:noclip", "original:512:bf16:eager",
    "original:512:bf16:noclip:eager", *FUSED_CELL_RUNS[1:], "original:512:tf32",
    "original:512:tf32:noclip",
    "small:512:bf16", "small:512:bf16:noclip", "original:128:bf16",
    "original:128:bf16:noclip", "small:128:bf16", "small:128:bf16:noclip",
    "small:512:bf16:eager", "original:512:bf16:noclip:reference", "original:128:bf16:eager",
    "small:512:tf32:noclip",
]
QUICK_TRAIN_RUNS = ["tiny:16:fp32", "tiny:16:bf16", "tiny:16:fp32:noclip",
                    "tiny:16:fp32:eager", "tiny:16:fp32:fused"]
RUN_SETS = {"fused-cell": FUSED_CELL_RUNS}  # a name on the command line for its runs


def train_runs(text: str) -> list[TrainRun]:
    """A run on the command line, or the runs of a name of `RUN_SETS`."""
    return [TrainRun.parse(run) for run in RUN_SETS.get(text, [text])]


class BenchTrainer(TimedTrainer):
    """The timed Trainer with the LSTM's step loop and back end chosen, the device
    synchronized where the timed steps begin and end (a step only issues its work), the
    training thread's CPU time over them, then torch.profiler over `profiled` steps: the
    device's kernel time over their wall time (its busy fraction), and its tables if
    `tables`."""

    run_spec: TrainRun
    warmup = 8  # steps before the timed ones (first steps, graph captures)
    timed = 24
    profiled = 6
    tables = False

    def setup(self):  # type: ignore[no-untyped-def]
        ckpt = super().setup()
        self.lm.bilm.lstm.step_loop = self.run_spec.step_loop
        self.lm.bilm.lstm.backend = self.run_spec.backend
        self.marks: dict[str, tuple[float, float]] = {}
        self.profile: dict[str, Any] = {}
        return ckpt

    def _mark(self, name: str) -> None:
        synchronize(self.world.device)
        self.marks[name] = (time.perf_counter(), time.thread_time())

    def _train_step(self, batch):  # type: ignore[no-untyped-def]
        done = len(self.step_tokens)
        if done == self.warmup:
            self._mark("timed")
        if done == self.warmup + self.timed:
            self._mark("profiled")
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.world.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.__enter__()
        n_tokens = super()._train_step(batch)
        if done == self.warmup + self.timed + self.profiled - 1:
            self._mark("end")
            self._profiler.__exit__(None, None, None)
            table, self._profiler = self._profiler.key_averages(), None
            kernel_us = sum(e.self_device_time_total for e in table)
            wall = self.marks["end"][0] - self.marks["profiled"][0]
            self.profile["gpu_busy"] = kernel_us / 1e6 / wall if self.world.device.type \
                == "cuda" else None
            if self.tables:
                self.profile["tables"] = {
                    f"by {key}": table.table(sort_by=key, row_limit=20, max_name_column_width=50)
                    for key in ("self_cpu_time_total", "self_device_time_total")}
        return n_tokens


def training_run(run: TrainRun, device: torch.device, train: Path, vocab: Path, work: Path,
                 quick: bool, tables: bool) -> dict[str, Any]:
    warmup, timed, profiled = (2, 4, 2) if quick else (8, 24, 6)
    config = TrainConfig(train=[str(train)], vocab=str(vocab), preset=run.preset,
                         batch_size=run.batch_size, max_steps=warmup + timed + profiled,
                         precision=run.precision, device=str(device), cuda_graphs=run.graphs,
                         lstm_clip=run.clip, checkpoint_every=10**9, eval_every=10**9,
                         log_every=10**9)
    trainer = BenchTrainer(config, work / run.name.replace(" ", "-"), progress=False)
    trainer.run_spec, trainer.tables = run, tables
    trainer.warmup, trainer.timed, trainer.profiled = warmup, timed, profiled
    trainer.run()
    (start, cpu_start), (stop, cpu_stop) = trainer.marks["timed"], trainer.marks["profiled"]
    tokens = sum(trainer.step_tokens[warmup : warmup + timed])
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    graphed = trainer.train_step if isinstance(trainer.train_step, GraphedStep) else None
    last = json.loads((trainer.out / "metrics.jsonl").read_text().splitlines()[-1])
    return {"tokens_per_s": tokens / (stop - start), "steps_timed": timed,
            "ms_per_step": 1000 * (stop - start) / timed,
            "host_ms_per_step": 1000 * (cpu_stop - cpu_start) / timed,
            "gpu_busy": trainer.profile.get("gpu_busy"),
            "graph_replays": graphed.replays if graphed else 0,
            "graph_failed": graphed.failed if graphed else None,
            "train_loss": last["train_loss"], "vocab_size": len(trainer.vocab),
            "softmax": trainer.lm.softmax_mode, "peak_memory_mb": peak and peak / 2**20,
            "flops_per_token": training_flops_per_token(trainer.lm.bilm.config,
                                                        len(trainer.vocab)),
            **({"profile": trainer.profile["tables"]} if tables else {})}


def training(report: Report, device: torch.device, train_text: Path, quick: bool,
             runs: list[TrainRun], profiled: list[TrainRun]) -> None:
    """Pretraining tokens/s of each run, its fraction of the card's limit, the device's busy
    fraction and the host's milliseconds a step; `profiled` runs also keep their tables."""
    rows = report.data.setdefault("training", [])
    limits = report.data["card"]["matmul_tflops"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train = head_lines(train_text, 2000 if quick else 8000, work / "train.txt")
        vocab = build_vocab([Path(train_text)], "whitespace", work / "vocab.txt")
        for run in [*runs, *(r for r in profiled if r not in runs)]:
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            result = report.guarded(f"train {run.name}", lambda run=run: training_run(
                run, device, train, vocab, work, quick, run in profiled))
            if result is None:
                continue
            if run in profiled:
                report.data.setdefault("profiles", {})[run.name] = result.pop("profile")
            limit = limits[run.precision] * 1e12 / result["flops_per_token"]
            rows.append({"preset": run.preset, "batch_size": run.batch_size,
                         "precision": run.precision, "graphs": run.graphs, "lstm": run.lstm,
                         "step_loop": run.step_loop or "default", **result,
                         "limit_tokens_per_s": limit,
                         "fraction_of_limit": result["tokens_per_s"] / limit})
            report.write()


# ---- ELMo or BERT -----------------------------------------------------------------------------


def elmo_or_bert(report: Report, device: torch.device, data: Path, quick: bool) -> None:
    """benchmarks/elmo_vs_bert.py on the device: no ONNX Runtime, no memory children (the
    rows hold the batch-1 pass's peak device memory); quick: one workload, tiny models."""
    sizes = ["--quick", "--workloads", "conll2003"] if quick else \
        ["--sentences", "512", "--latency-sentences", "64", "--repeats", "2"]
    args = elmo_vs_bert.options(["--device", str(device), "--data", str(data), "--threads",
                                 str(torch.get_num_threads()), "--memory-sentences", "0",
                                 *sizes])
    report.data["elmo_vs_bert"] = report.guarded("elmo vs bert", lambda: elmo_vs_bert.run(args))
    report.write()


# ---- the table -----------------------------------------------------------------------------


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table's lines."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows)]


def markdown(data: dict[str, Any]) -> str:
    c = data.get("card", {})
    lines = [f"# {c.get('name', c.get('device', '?'))}, torch {c.get('torch')}, CUDA "
             f"{c.get('cuda')}, {c.get('date')}", ""]
    rates = c.get("matmul_tflops", {})
    lines += ["matmul TFLOP/s: " + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()), ""]
    lines += ["## Correctness", "", "| check | max abs difference (per layer) | relative |",
              "|---|---|---|"]
    for check, result in (data.get("correctness") or {}).items():
        if check == "fixtures" and isinstance(result, dict):
            for name, r in result.items():
                lines.append(f"| fixture {name} vs TensorFlow | {r['max_abs_vs_tensorflow']:.2e} "
                             "| |")
        elif isinstance(result, dict):
            for variant, r in result.items():
                lines.append(f"| {check}, {variant} | "
                             + ", ".join(f"{v:.2e}" for v in r["max_abs"]) + " | "
                             + ", ".join(f"{v:.2e}" for v in r["relative"]) + " |")
        else:
            lines.append(f"| {check} | {result} | |")
    lines.append("")
    if data.get("embedding"):
        lines += ["## Embedding", "", *md_table(
            ["preset", "budget", "precision", "graphs", "tokens/s", "first pass", "limit", "frac",
             "peak MB"],
            [[r["preset"], f"{r['budget']:,}", r["precision"], "yes" if r["graphs"] else "no",
              f"{r['tokens_per_s']:,.0f}", f"{r['first_pass_tokens_per_s']:,.0f}",
              f"{r['limit_tokens_per_s']:,.0f}", f"{r['fraction_of_limit']:.3f}",
              f"{r['peak_memory_mb'] or 0:,.0f}"] for r in data["embedding"]]), ""]
    for preset, parts in (data.get("breakdown") or {}).items():
        if parts:
            lines += [f"Breakdown, {preset}, one batch (ms): "
                      + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()), ""]
    if data.get("training"):
        lines += ["## Pretraining", "", *md_table(
            ["preset", "rows", "precision", "step", "LSTM", "tokens/s", "limit", "frac",
             "GPU busy", "ms/step", "host ms/step", "loss", "peak MB"],
            [[r["preset"], str(r["batch_size"]), r["precision"],
              ("graphs" if r["graph_replays"] else "eager (capture failed)" if
               r["graph_failed"] else "eager") + (f", {r['step_loop']} loop"
                                                  if r["step_loop"] != "default" else ""),
              r["lstm"], f"{r['tokens_per_s']:,.0f}", f"{r['limit_tokens_per_s']:,.0f}",
              f"{r['fraction_of_limit']:.3f}",
              "" if r["gpu_busy"] is None else f"{r['gpu_busy']:.0%}",
              f"{r['ms_per_step']:.1f}", f"{r['host_ms_per_step']:.1f}",
              f"{r['train_loss']:.3f}", f"{r['peak_memory_mb'] or 0:,.0f}"]
             for r in data["training"]]), ""]
        failed = {f"{r['preset']} {r['batch_size']} {r['precision']} {r['lstm']}":
                  r["graph_failed"] for r in data["training"] if r["graph_failed"]}
        if failed:
            lines += ["Graph captures that failed: " + json.dumps(failed), ""]
    for name, tables in (data.get("profiles") or {}).items():
        for key, table in (tables or {}).items():
            lines += [f"Profile of pretraining {name}, {key}:", "", "```", table, "```", ""]
    if data.get("memory"):
        lines += ["## Memory", "", "```", json.dumps(data["memory"], indent=1), "```", ""]
    if data.get("elmo_vs_bert"):
        lines += ["## ELMo or BERT", "", elmo_vs_bert.markdown(data["elmo_vs_bert"])]
    lines += ["Seconds each: " + ", ".join(f"{k} {v}" for k, v in
                                         (data.get("seconds_each") or {}).items()), ""]
    if data.get("errors") or data.get("skipped_for_time"):
        lines += ["## Errors and skipped", "", "```",
                  json.dumps({"errors": data.get("errors"),
                              "skipped": data.get("skipped_for_time")}, indent=1), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path, required=True, help="writes gpu.json and gpu.md")
    parser.add_argument("--minutes", type=float, default=3.0,
                        help="time budget; what is measured by then is written (default 3)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--data", type=Path, help="folder with the texts (see above)")
    parser.add_argument("--fixtures", type=Path, default=SHARED / "fixtures" / "bilm-tf")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["correctness", "embedding", "memory", "training", "bert"])
    parser.add_argument("--presets", nargs="+", help="embedding presets (default: original "
                        "small; quick: tiny)")
    parser.add_argument("--budgets", nargs="+", type=int, help="embedding token budgets "
                        "(default 4096 16384 65536; quick: 256 1024)")
    parser.add_argument("--profile-runs", nargs="*", type=train_runs, metavar="RUN",
                        default=[], help="pretraining runs (as --train-runs) whose profiled "
                        "steps' torch.profiler tables are kept (default: none)")
    parser.add_argument("--train-runs", nargs="+", type=train_runs, metavar="RUN",
                        help="pretraining runs as PRESET:ROWS:PRECISION[:OPTION...], options "
                        "eager, noclip, a back end (reference, fused), packed, masked; or "
                        "fused-cell, for " + " ".join(FUSED_CELL_RUNS) + " (default: "
                        + " ".join(DEFAULT_TRAIN_RUNS) + "; quick: "
                        + " ".join(QUICK_TRAIN_RUNS) + ")")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA is not available: run with --device cpu (and --quick)")
    folders = [args.data] if args.data else [SHARED / "data/wikitext-2", SHARED / "bench"]
    candidates = [folder / name for folder in folders
                  for name in ("test.txt", "wikitext2_test_1000.txt")]
    embed_text = next((path for path in candidates if path.exists()), None)
    train_text = next((folder / "train.txt.gz" for folder in folders
                       if (folder / "train.txt.gz").exists()), None)
    if embed_text is None:
        sys.exit(f"no embedding text (test.txt or wikitext2_test_1000.txt) in {folders}")
    report = Report(args.out, time.monotonic() + 60 * args.minutes)
    report.data["card"] = card(device, args.quick)
    report.data["command"] = " ".join(sys.argv)
    report.write()
    texts = sentences_of(embed_text, 800 if args.quick else 200_000)
    if "correctness" not in args.skip:
        correctness(report, device, args.fixtures, texts, args.quick)
    presets = args.presets or (["tiny"] if args.quick else ["original", "small"])
    budgets = args.budgets or ([256, 1024] if args.quick else [4096, 16384, 65536])
    runs = [run for given in args.train_runs or [] for run in given] or [
        TrainRun.parse(r) for r in (QUICK_TRAIN_RUNS if args.quick else DEFAULT_TRAIN_RUNS)]
    profiled = [run for given in args.profile_runs for run in given]
    # In order of importance: the first preset's speed, memory, pretraining, the others, ELMo
    # or BERT.
    if "embedding" not in args.skip:
        embedding(report, device, texts, presets[:1], budgets)
    if "memory" not in args.skip:
        memory(report, device, texts, args.quick)
    if "training" not in args.skip and train_text is not None:
        training(report, device, train_text, args.quick, runs, profiled)
    if "embedding" not in args.skip:
        embedding(report, device, texts, presets[1:], budgets)
    if "bert" not in args.skip:
        bert_data = args.data if args.data and (args.data / "conll2003").is_dir() \
            else SHARED / "data"
        elmo_or_bert(report, device, bert_data, args.quick)
    report.data["seconds"] = round(60 * args.minutes - report.time_left(), 1)
    report.write()
    print((args.out / "gpu.md").read_text())


if __name__ == "__main__":
    main()
