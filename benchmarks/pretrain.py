"""Pretraining: training speed, and perplexity after a fixed time budget, via `elmo.training`.

1. Speed (English only): tokens/s of the training step of each preset on WikiText-2 train with
   its real 33,278-word vocabulary and the recipe's defaults (both directions, batch 128 x 20,
   Adagrad, softmax "auto": sampled with 8,192 candidates for this vocabulary). The real
   Trainer runs `--warmup-steps` then `--speed-steps` more; the timed loop includes reading
   and batching the data. Achieved GFLOP/s count 3x the forward FLOPs per token plus the
   softmax's (3 x 2 x P x (samples + 1) per token and direction; full softmax: V classes),
   against the fp32 matmul GFLOP/s measured at the start of the same run.
2. Budget: the `compact` preset trained from scratch for `--budget-minutes` (the trainer's
   `max_minutes`) on WikiText-2 train and, separately, on PTB train (Adam, lr 0.002, constant,
   no validation during the run), then the exact forward / backward / average perplexity of
   the last model on the matching test file (as `elmo perplexity`). The yardstick: Kim et al.
   (2016), char-aware LSTM LM, 5 M parameters, 92.3 PTB test perplexity after full training.

`--language zh` runs the budget part on the raw Chinese text of ../shared/data/zh-raw-text
(see `zh_corpus`: reviews and SIGHAN news; ChnSentiCorp is left out as a downstream test set),
held out deterministically (every 50th line is test) into a temporary directory, tokenized
with `--tokenizer jieba` (or `chars`), vocabulary min count 2 so that <UNK> is trained.

    python benchmarks/pretrain.py [--presets tiny compact small] [--budget-minutes 10]
    python benchmarks/pretrain.py --language zh [--tokenizer jieba|chars]
    python benchmarks/pretrain.py --quick     # smoke run: tiny model, slices, seconds;
                                              # its JSON goes to $TMPDIR/elmo-bench-quick/

Prints tables and writes benchmarks/results/pretrain.json (zh: pretrain_zh[_chars].json).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    DATA,
    KIM_2016_PTB,
    add_run_options,
    build_vocab,
    forward_flops_per_token,
    head_lines,
    machine_info,
    model_perplexity,
    n_parameters,
    oov_stats,
    open_text,
    results_file,
    run_training,
    train_metrics,
    training_flops_per_token,
    write_json,
)

from elmo.config import BiLMConfig
from elmo.modules.language_model import resolve_softmax
from elmo.training import TrainConfig
from elmo.training.model_init import load_language_model
from elmo.vocab import Vocabulary

NEVER = 10**9  # checkpoint / log interval that never comes (the end still writes both)

ENGLISH = {
    "wikitext2": (DATA / "wikitext-2/train.txt.gz", DATA / "wikitext-2/test.txt"),
    "ptb": (DATA / "ptb/ptb.train.txt.gz", DATA / "ptb/ptb.test.txt"),
}

# (file, CSV column or None for a SIGHAN file, CSV category values to leave out)
ZH_SOURCES = (
    ("online_shopping_10_cats.csv.gz", "review", {"酒店"}),  # hotels: overlap ChnSentiCorp
    ("waimai_10k.csv", "review", set()),
    ("sighan2005_msr_test_gold.utf8", None, set()),
    ("sighan2005_pku_test_gold.utf8", None, set()),
)
ZH_REVIEWS = ZH_SOURCES[:2]  # first, so zh_corpus's line i of them is their line i
ZH_LEFT_OUT = "ChnSentiCorp_htl_all.csv (kept unseen for sentiment evaluation)"


# ---- data -------------------------------------------------------------------------------


def zh_lines(directory: Path, sources: tuple = ZH_SOURCES) -> list[str]:
    """The raw Chinese lines of `sources`, in order: BOMs stripped, inner line breaks
    joined, SIGHAN segmentation spaces removed, empty lines dropped."""
    lines: list[str] = []
    for name, column, skip in sources:
        with open_text(directory / name) as f:
            if column is None:
                texts = ("".join(line.split()) for line in f)
            else:
                rows = csv.DictReader(io.StringIO(f.read().lstrip("\ufeff")))
                texts = (" ".join((row[column] or "").split()) for row in rows
                         if row.get("cat") not in skip)
            lines.extend(t.replace("\ufeff", "").strip() for t in texts)
    return [t for t in lines if t]


def zh_split(lines: list[str], test_every: int) -> tuple[list[str], list[str]]:
    """(train, test) in order: line i is test if i % test_every == test_every - 1."""
    test = [t for i, t in enumerate(lines) if i % test_every == test_every - 1]
    train = [t for i, t in enumerate(lines) if i % test_every != test_every - 1]
    return train, test


def zh_corpus(directory: Path, out: Path, test_every: int = 50,
              max_train: int | None = None, max_test: int | None = None) -> dict[str, Any]:
    """Split the Chinese text: line i is test if i % test_every == test_every - 1, else
    train; the train lines are shuffled with seed 0 (the trainer reads files in order).
    Writes out/train.txt and out/test.txt (never into the repository)."""
    train, test = zh_split(zh_lines(directory), test_every)
    random.Random(0).shuffle(train)
    train, test = train[:max_train], test[:max_test]
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    (out / "test.txt").write_text("\n".join(test) + "\n", encoding="utf-8")
    return {
        "sources": [name for name, _, _ in ZH_SOURCES], "left_out": ZH_LEFT_OUT,
        "excluded_categories": sorted(set().union(*(s for _, _, s in ZH_SOURCES))),
        "split": f"line i (in source order) is test if i % {test_every} == {test_every - 1}; "
                 "train lines shuffled with seed 0",
        "train_lines": len(train), "test_lines": len(test),
        "train_chars": sum(len(t) for t in train), "test_chars": sum(len(t) for t in test),
    }


def zh_reviews(directory: Path, out: Path, test_every: int = 50) -> dict[str, Any]:
    """The reviews of zh_corpus's split, in source order: out/train.jsonl (JSON lines, a review
    a document) and out/test.txt (the first lines of zh_corpus's test.txt)."""
    train, test = zh_split(zh_lines(directory, ZH_REVIEWS), test_every)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "train.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in train)
    (out / "test.txt").write_text("\n".join(test) + "\n", encoding="utf-8")
    return {"train_lines": len(train), "train_chars": sum(len(t) for t in train),
            "test_lines": len(test), "test_chars": sum(len(t) for t in test)}


# ---- 1. speed ---------------------------------------------------------------------------


def measure_speed(preset: str, train: Path, vocab_file: Path, work: Path, warmup: int,
                  steps: int, gflops_limit: float) -> dict[str, Any]:
    vocab_size = len(Vocabulary.from_file(vocab_file))
    config = TrainConfig(train=[str(train)], vocab=str(vocab_file), preset=preset,
                         max_steps=warmup + steps, checkpoint_every=NEVER, log_every=NEVER,
                         device="cpu", seed=0)
    run = run_training(config, work / f"speed-{preset}")
    bilm_config = BiLMConfig.preset(preset)
    flops = training_flops_per_token(bilm_config, vocab_size, config.softmax,
                                     config.num_samples)
    tps = run.tokens_per_s(skip=warmup)
    lm, _ = load_language_model(work / f"speed-{preset}")
    return {
        "preset": preset, "vocab_size": vocab_size,
        "softmax": resolve_softmax(config.softmax, vocab_size),
        "num_samples": config.num_samples, "batch_size": config.batch_size,
        "unroll_steps": config.unroll_steps, "optimizer": config.optimizer,
        "parameters_bilm": n_parameters(lm.bilm), "parameters_softmax": n_parameters(lm.softmax),
        "warmup_steps": warmup, "timed_steps": steps,
        "seconds_per_step": run.seconds_per_step(skip=warmup), "tokens_per_s": tps,
        "forward_mflop_per_token": forward_flops_per_token(bilm_config) / 1e6,
        "train_mflop_per_token": flops / 1e6,
        "gflops_achieved": tps * flops / 1e9,
        "fraction_of_limit": tps * flops / (gflops_limit * 1e9),
        "limit_tokens_per_s": gflops_limit * 1e9 / flops,
    }


def print_speed(rows: list[dict[str, Any]]) -> None:
    print(f"{'preset':9}{'softmax':9}{'params M':>9}{'s/step':>8}{'tok/s':>8}{'limit':>8}"
          f"{'frac':>7}{'GFLOP/s':>9}{'MFLOP/tok':>10}")
    for r in rows:
        params = (r["parameters_bilm"] + r["parameters_softmax"]) / 1e6
        print(f"{r['preset']:9}{r['softmax']:9}{params:9.1f}{r['seconds_per_step']:8.2f}"
              f"{r['tokens_per_s']:8.0f}{r['limit_tokens_per_s']:8.0f}"
              f"{r['fraction_of_limit']:7.2f}{r['gflops_achieved']:9.1f}"
              f"{r['train_mflop_per_token']:10.1f}")


# ---- 2. perplexity after a time budget --------------------------------------------------


def budget_run(name: str, train: Path, test: Path, work: Path, args: argparse.Namespace,
               tokenizer: str = "whitespace", min_count: int = 1) -> dict[str, Any]:
    out = work / f"budget-{name}"
    config = TrainConfig(train=[str(train)], preset=args.preset, tokenizer=tokenizer,
                         min_count=min_count, optimizer=args.optimizer, lr=args.lr,
                         max_minutes=args.budget_minutes, checkpoint_every=NEVER,
                         log_every=args.log_every, device="cpu", seed=0)
    print(f"budget: training {args.preset} on {name} for {args.budget_minutes:g} min ...",
          flush=True)
    run = run_training(config, out)
    vocab = Vocabulary.from_file(out / "vocab.txt")
    print(f"budget: {run.steps} steps, {run.tokens:,} tokens; scoring {test.name} ...",
          flush=True)
    ppl = model_perplexity(out, test, tokenizer)
    records = train_metrics(out)
    train_log = [{k: r[k] for k in ("step", "train_ppl", "tokens_per_s")}
                 for r in records if "train_loss" in r]
    lm, _ = load_language_model(out)
    tps = run.tokens_per_s(skip=min(2, max(run.steps - 1, 0)))
    flops = training_flops_per_token(lm.bilm.config, len(vocab), config.softmax,
                                     config.num_samples)
    return {
        "corpus": name, "train": str(train), "test": str(test), "tokenizer": tokenizer,
        "preset": args.preset, "optimizer": config.optimizer, "lr": config.learning_rate,
        "schedule": config.schedule, "min_count": min_count, "vocab_size": len(vocab),
        "softmax": resolve_softmax(config.softmax, len(vocab)),
        "batch_size": config.batch_size, "unroll_steps": config.unroll_steps,
        "parameters_bilm": n_parameters(lm.bilm), "parameters_softmax": n_parameters(lm.softmax),
        "budget_minutes": args.budget_minutes, "train_minutes": run.train_seconds / 60,
        "setup_seconds": run.setup_seconds, "stopped_for_time": run.result.stopped_for_time,
        "steps": run.steps, "tokens_seen": run.tokens,
        "epochs": run.tokens / max(_corpus_tokens(out), 1),
        "tokens_per_s": tps, "train_mflop_per_token": flops / 1e6,
        "gflops_achieved": tps * flops / 1e9,
        "fraction_of_limit": tps * flops / (args.matmul_gflops * 1e9),
        "test_oov": oov_stats(test, vocab, tokenizer), "test_perplexity": ppl,
        "train_log": train_log,
    }


def _corpus_tokens(out: Path) -> int:
    return json.loads((out / "run.json").read_text(encoding="utf-8"))["n_tokens"]


def print_budget(rows: list[dict[str, Any]]) -> None:
    print(f"{'corpus':12}{'tok':7}{'vocab':>7}{'mins':>6}{'steps':>7}{'tokens':>11}"
          f"{'epochs':>7}{'tok/s':>7}{'frac':>6}{'OOV%':>6}{'fwd ppl':>9}{'bwd ppl':>9}"
          f"{'avg ppl':>9}{'char ppl':>9}")
    for r in rows:
        p = r["test_perplexity"]
        print(f"{r['corpus']:12}{r['tokenizer'][:6]:7}{r['vocab_size']:7}"
              f"{r['train_minutes']:6.1f}{r['steps']:7}{r['tokens_seen']:11,}"
              f"{r['epochs']:7.2f}{r['tokens_per_s']:7.0f}{r['fraction_of_limit']:6.2f}"
              f"{100 * r['test_oov']['oov_token_rate']:6.2f}{p['forward']:9.1f}"
              f"{p['backward']:9.1f}{p['average']:9.1f}{p['per_char_average']:9.2f}")


# ---- main -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", choices=("en", "zh"), default="en")
    parser.add_argument("--parts", nargs="+", choices=("speed", "budget"),
                        default=["speed", "budget"], help="English: what to run")
    parser.add_argument("--presets", nargs="+", default=["tiny", "compact", "small"],
                        help="speed: presets to time")
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--speed-steps", type=int, default=10)
    parser.add_argument("--corpora", nargs="+", choices=sorted(ENGLISH),
                        default=["wikitext2", "ptb"], help="English budget runs")
    parser.add_argument("--budget-minutes", type=float, default=10.0)
    parser.add_argument("--preset", help="budget runs' preset (default compact; quick: tiny)")
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--tokenizer", choices=("jieba", "chars"), default="jieba",
                        help="zh: tokenizer")
    parser.add_argument("--min-count", type=int,
                        help="vocabulary min count (default: en 1, the closed vocabularies; "
                        "zh 2, so that <UNK> is trained for unseen test words)")
    parser.add_argument("--test-every", type=int, default=50, help="zh: every Nth line is test")
    add_run_options(parser, "smoke run: tiny preset, data slices, a few seconds of training")
    args = parser.parse_args()
    if args.quick:
        args.presets, args.warmup_steps, args.speed_steps = ["tiny"], 1, 2
        args.budget_minutes, args.log_every = min(args.budget_minutes, 0.05), 2
        args.preset = args.preset or "tiny"
    args.preset = args.preset or "compact"
    if args.min_count is None:
        args.min_count = 2 if args.language == "zh" else 1
    if args.out is None:
        name = "pretrain" if args.language == "en" else (
            "pretrain_zh" + ("" if args.tokenizer == "jieba" else f"_{args.tokenizer}"))
        args.out = results_file(f"{name}.json", args.quick)

    with tempfile.TemporaryDirectory(prefix="elmo-pretrain-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        machine = machine_info()
        args.matmul_gflops = machine["matmul_gflops"]
        print(f"fp32 matmul: {machine['matmul_gflops']:.0f} GFLOP/s, torch threads: "
              f"{machine['torch_threads']}", flush=True)
        report: dict[str, Any] = {"language": args.language, "quick": args.quick,
                                  "machine": machine, "started": time.strftime("%F %T %Z")}
        if args.language == "en":
            run_english(args, work, Path(tmp), machine, report)
        else:
            run_chinese(args, work, Path(tmp), report)
        report["finished"] = time.strftime("%F %T %Z")
        write_json(args.out, report)


def _maybe_slice(path: Path, tmp: Path, lines: int, quick: bool) -> Path:
    return head_lines(path, lines, tmp / f"quick-{path.name.removesuffix('.gz')}") \
        if quick else path


def run_english(args: argparse.Namespace, work: Path, tmp: Path, machine: dict[str, Any],
                report: dict[str, Any]) -> None:
    if "speed" in args.parts:
        train = _maybe_slice(ENGLISH["wikitext2"][0], tmp, 3000, args.quick)
        vocab_file = build_vocab([train], "whitespace", tmp / "wikitext2-vocab.txt")
        print(f"speed: vocabulary of {len(Vocabulary.from_file(vocab_file)):,} words; "
              f"{args.warmup_steps} warm-up + {args.speed_steps} timed steps per preset",
              flush=True)
        rows = []
        for preset in args.presets:
            rows.append(measure_speed(preset, train, vocab_file, work, args.warmup_steps,
                                      args.speed_steps, machine["matmul_gflops"]))
            print(f"speed: {preset}: {rows[-1]['tokens_per_s']:.0f} tokens/s", flush=True)
        report["speed"] = rows
        print_speed(rows)
    if "budget" in args.parts:
        rows = []
        for name in args.corpora:
            train, test = ENGLISH[name]
            train = _maybe_slice(train, tmp, 3000, args.quick)
            test = _maybe_slice(test, tmp, 100, args.quick)
            rows.append(budget_run(name, train, test, work, args, min_count=args.min_count))
        report["budget"] = rows
        report["yardstick"] = KIM_2016_PTB
        print_budget(rows)
        print(f"yardstick: {KIM_2016_PTB['model']}, {KIM_2016_PTB['parameters']} parameters: "
              f"{KIM_2016_PTB['ptb_test_perplexity']} PTB test perplexity after full GPU "
              "training (forward only, per word)")


def run_chinese(args: argparse.Namespace, work: Path, tmp: Path,
                report: dict[str, Any]) -> None:
    source = DATA / "zh-raw-text"
    split = zh_corpus(source, tmp / "zh", args.test_every,
                      max_train=3000 if args.quick else None,
                      max_test=100 if args.quick else None)
    print(f"zh: {split['train_lines']:,} train lines ({split['train_chars']:,} chars), "
          f"{split['test_lines']:,} test lines ({split['test_chars']:,} chars)", flush=True)
    report["corpus"] = split
    row = budget_run(f"zh-{args.tokenizer}", tmp / "zh/train.txt", tmp / "zh/test.txt", work,
                     args, tokenizer=args.tokenizer, min_count=args.min_count)
    report["budget"] = [row]
    print_budget([row])
    print("char ppl: exp of the mean loss per character (+1 per sentence end), comparable "
          "across tokenizers; OOV test words are scored as the <UNK> class")


if __name__ == "__main__":
    sys.exit(main())
