"""Helpers shared by the benchmarks: FLOP counts, the matmul yardstick, data paths, and
training / perplexity through the real `elmo.training` code path.

The benchmarks are scripts (`python benchmarks/NAME.py`), so this module is imported as
`common` from the benchmarks directory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from elmo.config import PRESETS, BiLMConfig
from elmo.data.corpus import expand_paths, iter_sentences
from elmo.modules.bilm import BiLM
from elmo.modules.language_model import resolve_softmax
from elmo.training import TrainConfig, Trainer, TrainResult, evaluate_perplexity
from elmo.training.evaluate import PerplexityTotals
from elmo.training.model_init import load_language_model
from elmo.vocab import Vocabulary

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ELMO_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"
RESULTS = REPO / "benchmarks" / "results"

# Kim, Jernite, Sontag and Rush (2016), "Character-Aware Neural Language Models", LSTM-Char-
# Small on the Penn Treebank: ~5 M parameters, 92.3 test perplexity after full GPU training.
KIM_2016_PTB = {
    "model": "Kim et al. (2016) char-aware LSTM LM (LSTM-Char-Small)",
    "parameters": "5 M", "ptb_test_perplexity": 92.3, "training": "full, on a GPU",
}


# ---- FLOPs and the matmul-bound limit --------------------------------------------------


def forward_flops_per_token(config: BiLMConfig) -> float:
    """Multiply-adds x 2 of one token position's forward pass, without any per-word cache."""
    c, e, f, p = config.max_characters_per_token, config.char_embed_dim, config.n_filters, \
        config.projection_dim
    cnn = sum(2 * (c - w + 1) * w * e * n for w, n in config.filters)
    highway = config.n_highway * 2 * (2 * f * f)
    projection = 2 * f * p
    lstm = config.n_layers * 2 * (2 * 2 * p * 4 * config.lstm_dim + 2 * config.lstm_dim * p)
    return float(cnn + highway + projection + lstm)


def softmax_training_flops_per_token(
    projection_dim: int, vocab_size: int, softmax: str = "auto", num_samples: int = 8192
) -> float:
    """Forward + backward FLOPs of the softmax for one token, both directions:
    3 x 2 x P x (num_samples + 1) per direction when sampled, 3 x 2 x P x V when full."""
    mode = resolve_softmax(softmax, vocab_size)
    classes = vocab_size if mode == "full" else min(num_samples, vocab_size) + 1
    return 2 * 3 * 2 * projection_dim * classes


def training_flops_per_token(
    config: BiLMConfig, vocab_size: int, softmax: str = "auto", num_samples: int = 8192
) -> float:
    """Nominal FLOPs of one training token (both directions): 3x the forward pass (forward,
    and twice that for the backward pass) plus the softmax's. Nominal: the char-CNN actually
    runs once per distinct token of a batch, so the encoder's share is an upper estimate."""
    return 3 * forward_flops_per_token(config) + softmax_training_flops_per_token(
        config.projection_dim, vocab_size, softmax, num_samples
    )


def matmul_gflops(size: int = 2048, repeats: int = 10, kernel: str = "default") -> float:
    """Best fp32 GFLOP/s of a square matmul: torch's default kernel (`torch.mm`, MKL on x86;
    this machine's compute-bound yardstick), or "onednn", elmo's fp32 inference path."""
    from elmo.modules import onednn

    a, b = torch.randn(size, size), torch.randn(size, size)
    owner = torch.nn.Module()
    product = (lambda: onednn.packed_linear(a, owner, "b", b)) if kernel == "onednn" else \
        (lambda: a @ b)
    product()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def other_training_runs() -> list[str]:
    """Command lines of `elmo train` processes running on this machine (they would share
    the CPU with a benchmark and spoil its numbers)."""
    try:
        out = subprocess.run(["pgrep", "-af", "elmo train"], capture_output=True, text=True,
                             check=False).stdout
    except FileNotFoundError:
        return []
    mine = os.getpid()
    return [line for line in out.splitlines()
            if line.split(maxsplit=1)[0] != str(mine) and "pgrep" not in line]


def machine_info() -> dict[str, Any]:
    """The compute yardstick and what else is running, measured now."""
    others = other_training_runs()
    if others:
        print("WARNING: other training runs share the CPU; the numbers will be low:\n  "
              + "\n  ".join(others))
    return {"matmul_gflops": matmul_gflops(), "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__,
            "other_training_runs": others}


ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")


def cpu_info() -> dict[str, Any]:
    """The CPU's model name, the vector instruction sets it has (of ISA_FLAGS), and the one
    torch's kernels use."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:  # not Linux
        pass
    return {"cpu": cpu, "isa": [f for f in ISA_FLAGS if f in flags],
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


def preset_name(config: BiLMConfig) -> str | None:
    """The preset with `config`'s architecture (vocab size and dropout aside), if any."""
    def arch(c: BiLMConfig) -> dict[str, Any]:
        return {k: v for k, v in c.to_dict().items()
                if k not in ("vocab_size", "dropout", "extra_options")}

    return next((name for name, preset in PRESETS.items() if arch(preset) == arch(config)), None)


def random_model(preset: str, seed: int = 0) -> BiLM:
    """A biLM of `preset` with random weights, biases too (so that no gate sits at its
    initial value)."""
    torch.manual_seed(seed)
    model = BiLM(BiLMConfig.preset(preset))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.5, 0.5)
    return model.eval()


def n_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---- data -------------------------------------------------------------------------------


def open_text(path: Path):
    """A text file, gzipped or plain, for reading."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def head_lines(path: Path, n: int, out: Path) -> Path:
    """Write the first `n` lines of `path` (gz or plain) to `out` (for --quick runs)."""
    with open_text(path) as src, out.open("w", encoding="utf-8") as dst:
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out


def build_vocab(paths: Iterable[Path], tokenizer: str, out: Path, min_count: int = 1) -> Path:
    """The vocabulary `elmo train` would build from `paths`, written to `out`."""
    from elmo.training import scan_corpus

    _, vocab = scan_corpus([Path(p) for p in paths], tokenizer, min_count=min_count)
    vocab.save(out)
    return out


def oov_stats(path: Path, vocab: Vocabulary, tokenizer: str = "whitespace") -> dict[str, Any]:
    """Word tokens and types of `path` outside `vocab` (they are scored as <UNK>)."""
    tokens = oov_tokens = 0
    types: set[str] = set()
    oov_types: set[str] = set()
    for words in iter_sentences(expand_paths([path]), tokenizer):
        tokens += len(words)
        types.update(words)
        for w in words:
            if w not in vocab:
                oov_tokens += 1
                oov_types.add(w)
    return {"tokens": tokens, "oov_tokens": oov_tokens,
            "oov_token_rate": oov_tokens / max(tokens, 1), "types": len(types),
            "oov_types": len(oov_types), "oov_examples": sorted(oov_types)[:20]}


# ---- training and perplexity ------------------------------------------------------------


class TimedTrainer(Trainer):
    """The real Trainer; also records when each step ended and how many tokens it had (on a
    GPU, when the host had issued the step: synchronize to time the device)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_ends: list[float] = []
        self.step_tokens: list[int] = []

    def _train_step(self, batch):  # type: ignore[no-untyped-def]
        if not self.step_ends:  # the first step's start: after setup
            self.step_ends.append(time.perf_counter())
        n_tokens = super()._train_step(batch)
        self.step_ends.append(time.perf_counter())
        self.step_tokens.append(n_tokens)
        return n_tokens


@dataclass
class TrainRun:
    """What a benchmark keeps of one training run."""

    result: TrainResult
    steps: int  # steps taken by this process
    tokens: int  # tokens (positions, each predicted in both directions) seen by this process
    train_seconds: float  # from the first step's start to the last step's end
    setup_seconds: float  # scanning the corpus, building the model
    step_ends: list[float] = field(repr=False, default_factory=list)
    step_tokens: list[int] = field(repr=False, default_factory=list)

    def tokens_per_s(self, skip: int = 0) -> float:
        """Throughput of the training loop (data, step, logging) after `skip` warm-up steps."""
        if len(self.step_tokens) <= skip:
            return float("nan")
        seconds = self.step_ends[-1] - self.step_ends[skip]
        return sum(self.step_tokens[skip:]) / max(seconds, 1e-9)

    def seconds_per_step(self, skip: int = 0) -> float:
        n = len(self.step_tokens) - skip
        return (self.step_ends[-1] - self.step_ends[skip]) / n if n > 0 else float("nan")


def run_training(config: TrainConfig, out: Path) -> TrainRun:
    """Train `config` in `out` in this process through `elmo.training.Trainer`."""
    start = time.perf_counter()
    trainer = TimedTrainer(config, out, progress=False)
    result = trainer.run()
    ends, tokens = trainer.step_ends, trainer.step_tokens
    train_seconds = ends[-1] - ends[0] if ends else 0.0
    setup = (ends[0] if ends else time.perf_counter()) - start
    return TrainRun(result, len(tokens), sum(tokens), train_seconds, setup, ends, tokens)


def train_metrics(out: Path) -> list[dict[str, Any]]:
    path = Path(out) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def perplexity_of(
    lm, vocab: Vocabulary, path: Path, tokenizer: str = "whitespace", batch_size: int = 64
) -> dict[str, Any]:
    """Forward, backward and average perplexity of `lm` on `path` (as `elmo perplexity`),
    with the time it took and the number of characters, for a per-character perplexity."""
    n_chars = 0

    def sentences():
        nonlocal n_chars
        for words in iter_sentences(expand_paths([path]), tokenizer):
            n_chars += sum(len(w) for w in words) + 1  # + the end of the sentence
            yield words

    start = time.perf_counter()
    totals: PerplexityTotals = evaluate_perplexity(lm, sentences(), vocab, batch_size)
    result = totals.to_dict()
    result["seconds"] = time.perf_counter() - start
    result["chars"] = n_chars
    result["per_char_average"] = math.exp(
        0.5 * (totals.nll_forward + totals.nll_backward) / max(n_chars, 1))
    return result


def model_perplexity(model_dir: Path, path: Path, tokenizer: str = "whitespace",
                     batch_size: int = 64) -> dict[str, Any]:
    """`elmo perplexity MODEL FILE`: the model written by `elmo train`, on the CPU."""
    lm, vocab = load_language_model(model_dir)
    return perplexity_of(lm, vocab, path, tokenizer, batch_size)


def add_run_options(parser: argparse.ArgumentParser, quick_help: str) -> None:
    """--quick, --work-dir and --out, as the training benchmarks take them."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--work-dir", type=Path,
                        help="keep the run directories here (default: a temporary directory)")
    parser.add_argument("--out", type=Path, help="JSON results (default: benchmarks/results/; "
                        "quick: under $TMPDIR/elmo-bench-quick/)")


def results_file(name: str, quick: bool) -> Path:
    """Where a benchmark's JSON goes by default; a smoke run's never over the real results."""
    return (Path(tempfile.gettempdir()) / "elmo-bench-quick" if quick else RESULTS) / name


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
