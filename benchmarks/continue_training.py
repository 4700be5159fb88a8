"""Domain adaptation (Peters et al. 2018, section 2.4): continue training a WikiText-2 biLM on
PTB and compare with training from scratch on PTB for the same time budget.

Steps, all through `elmo.training` (the code behind `elmo train` / `elmo perplexity`):
1. Before: the base model's PTB valid and test perplexity
   a. with its own (WikiText-2) vocabulary: PTB words outside it are scored as the single
      class <UNK>, which the base never saw as a target (its vocabulary holds every
      WikiText-2 training word), so they cost a lot. PTB's own `<unk>` marker is an ordinary
      word of WikiText-2's vocabulary;
   b. with PTB's vocabulary, i.e. step 0 of continued training: `--init-from` builds the
      softmax over the vocabulary of the new training data, keeping the base's row for every
      word it knows and starting the others from their char-CNN token vectors (bias 0).
      Before and after are then measured over the same classes.
2. After: `elmo train --init-from BASE` on PTB train with the ULMFiT options (discriminative
   lr factor 2.6, slanted triangular schedule; `--gradual-unfreeze` optional), Adam, for
   `--budget-minutes`. The schedule needs a step count: a few calibration steps measure the
   step time and `max_steps` is set to fit the budget; `max_minutes` is the hard stop.
3. Baseline: the base's architecture from scratch on PTB train, same budget, same optimizer,
   learning rate and schedule (no discriminative factor).
Both trained models use the vocabulary the trainer builds from PTB train (every PTB valid and
test word is in it). Perplexities are exact, every line one sentence from a zero state.

    python benchmarks/continue_training.py [--base runs/wikitext2-compact] [--budget-minutes 5]
    python benchmarks/continue_training.py --quick   # smoke run: a tiny base, seconds

Prints a table and writes benchmarks/results/continue_training.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    DATA,
    KIM_2016_PTB,
    REPO,
    add_run_options,
    head_lines,
    machine_info,
    n_parameters,
    oov_stats,
    perplexity_of,
    preset_name,
    results_file,
    run_training,
    train_metrics,
    write_json,
)

from elmo.loading.formats.native import is_native_dir
from elmo.optim.groups import layer_groups
from elmo.runs import CHECKPOINT_NAME, read_checkpoint_meta
from elmo.training import TrainConfig
from elmo.training.model_init import build_language_model, load_language_model
from elmo.vocab import Vocabulary

NEVER = 10**9
PTB = {"train": DATA / "ptb/ptb.train.txt.gz", "valid": DATA / "ptb/ptb.valid.txt",
       "test": DATA / "ptb/ptb.test.txt"}
BASE_CANDIDATES = (REPO / "runs/wikitext2-compact", REPO / "src/elmo/pretrained/default")


def resolve_base(spec: Path | None) -> Path:
    if spec is not None:
        return spec
    for candidate in BASE_CANDIDATES:
        if is_native_dir(candidate) and (candidate / "vocab.txt").is_file():
            return candidate
    raise SystemExit("no base model: give --base DIR (a directory written by `elmo train`); "
                     f"looked in {', '.join(str(c) for c in BASE_CANDIDATES)}")


def quick_base(tmp: Path) -> Path:
    """A tiny WikiText-2 model trained a few steps (for --quick)."""
    train = head_lines(DATA / "wikitext-2/train.txt.gz", 3000, tmp / "quick-wt2-train.txt")
    out = tmp / "quick-base"
    run_training(TrainConfig(train=[str(train)], preset="tiny", max_steps=5, device="cpu",
                             checkpoint_every=NEVER, log_every=NEVER), out)
    return out


def evaluate(lm, vocab: Vocabulary, files: dict[str, Path]) -> dict[str, Any]:
    out = {}
    for split in ("valid", "test"):
        out[split] = perplexity_of(lm, vocab, files[split])
        print(f"  {split}: average perplexity {out[split]['average']:.1f} "
              f"({out[split]['seconds']:.0f} s)", flush=True)
    return out


def train_and_evaluate(label: str, config: TrainConfig, out: Path,
                       files: dict[str, Path]) -> dict[str, Any]:
    print(f"{label}: training up to {config.max_steps} steps / {config.max_minutes:g} min ...",
          flush=True)
    run = run_training(config, out)
    print(f"{label}: {run.steps} steps, {run.tokens:,} tokens in "
          f"{run.train_seconds / 60:.1f} min; scoring", flush=True)
    lm, vocab = load_language_model(out)
    return {
        "label": label, "vocab_size": len(vocab), "steps": run.steps,
        "tokens_seen": run.tokens, "train_minutes": run.train_seconds / 60,
        "setup_seconds": run.setup_seconds, "stopped_for_time": run.result.stopped_for_time,
        "tokens_per_s": run.tokens_per_s(skip=min(2, max(run.steps - 1, 0))),
        "config": config.to_dict(),
        "train_log": [{k: r[k] for k in ("step", "train_ppl", "lr")}
                      for r in train_metrics(out) if "train_loss" in r],
        "perplexity": evaluate(lm, vocab, files),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'model':46}{'vocab':>7}{'steps':>7}{'tokens':>10}{'mins':>6}"
          f"{'valid fwd':>10}{'bwd':>8}{'avg':>8}{'test fwd':>10}{'bwd':>8}{'avg':>8}")
    for r in rows:
        v, t = r["perplexity"]["valid"], r["perplexity"]["test"]
        steps = f"{r['steps']:7}" if r.get("steps") is not None else f"{'-':>7}"
        tokens = f"{r['tokens_seen']:10,}" if r.get("tokens_seen") is not None \
            else f"{'-':>10}"
        mins = f"{r['train_minutes']:6.1f}" if r.get("train_minutes") is not None \
            else f"{'-':>6}"
        print(f"{r['label']:46}{r['vocab_size']:7}{steps}{tokens}{mins}"
              f"{v['forward']:10.1f}{v['backward']:8.1f}{v['average']:8.1f}"
              f"{t['forward']:10.1f}{t['backward']:8.1f}{t['average']:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="model trained on WikiText-2 by `elmo "
                        "train` (default: runs/wikitext2-compact, else the shipped default)")
    parser.add_argument("--budget-minutes", type=float, default=5.0)
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--lr", type=float, default=0.002,
                        help="peak learning rate of the top group (both runs)")
    parser.add_argument("--discriminative-lr", type=float, default=2.6)
    parser.add_argument("--schedule", default="slanted-triangular",
                        choices=("slanted-triangular", "constant"), help="both runs")
    parser.add_argument("--gradual-unfreeze", action="store_true",
                        help="continued run: unfreeze one group every steps/groups steps")
    parser.add_argument("--scratch-preset",
                        help="baseline architecture (default: the base's preset)")
    parser.add_argument("--calibration-steps", type=int, default=4)
    add_run_options(parser, "smoke run: a tiny base, data slices, seconds of training")
    args = parser.parse_args()
    if args.out is None:
        args.out = results_file("continue_training.json", args.quick)
    if args.quick:
        args.budget_minutes, args.calibration_steps = min(args.budget_minutes, 0.05), 2

    with tempfile.TemporaryDirectory(prefix="elmo-continue-") as tmp_name:
        tmp = Path(tmp_name)
        work = args.work_dir or tmp
        work.mkdir(parents=True, exist_ok=True)
        machine = machine_info()
        print(f"fp32 matmul: {machine['matmul_gflops']:.0f} GFLOP/s, torch threads: "
              f"{machine['torch_threads']}", flush=True)
        files = dict(PTB)
        if args.quick:
            files = {"train": head_lines(PTB["train"], 3000, tmp / "ptb.train.txt"),
                     "valid": head_lines(PTB["valid"], 100, tmp / "ptb.valid.txt"),
                     "test": head_lines(PTB["test"], 100, tmp / "ptb.test.txt")}
        base = quick_base(tmp) if args.quick and args.base is None else resolve_base(args.base)
        base_lm, base_vocab = load_language_model(base)
        arch = preset_name(base_lm.bilm.config)
        scratch_preset = args.scratch_preset or arch
        if scratch_preset is None:
            raise SystemExit("the base's architecture is no preset: give --scratch-preset")
        print(f"base: {base} ({arch or 'custom'} architecture, {n_parameters(base_lm.bilm):,} "
              f"+ {n_parameters(base_lm.softmax):,} softmax parameters, vocabulary of "
              f"{len(base_vocab):,})", flush=True)
        base_valid = [r for r in train_metrics(base) if "valid_ppl" in r]
        base_finished = None
        if (base / CHECKPOINT_NAME).is_file():
            meta = read_checkpoint_meta(base / CHECKPOINT_NAME)
            base_finished = bool(meta["finished"])
            if not base_finished:
                print(f"WARNING: the base run is unfinished (checkpoint of step "
                      f"{meta['step']:,}); its model is the best one so far", flush=True)

        # 1a. before, the base's own vocabulary
        oov = {split: oov_stats(files[split], base_vocab) for split in ("valid", "test")}
        print(f"PTB words outside the base vocabulary (scored as <UNK>): valid "
              f"{100 * oov['valid']['oov_token_rate']:.2f}%, test "
              f"{100 * oov['test']['oov_token_rate']:.2f}% of tokens", flush=True)
        print("before (base vocabulary):", flush=True)
        rows = [{"label": "before: WT2 base, its vocab (OOV as <UNK>)",
                 "vocab_size": len(base_vocab), "perplexity": evaluate(base_lm, base_vocab, files)}]

        # 1b. before, PTB's vocabulary: step 0 of continued training
        common_options = dict(train=[str(files["train"])], optimizer=args.optimizer, lr=args.lr,
                              schedule=args.schedule, checkpoint_every=NEVER, log_every=25,
                              device="cpu", seed=0)
        calib = run_training(TrainConfig(**common_options, preset=scratch_preset,
                                         max_steps=args.calibration_steps), work / "calibration")
        ptb_vocab = Vocabulary.from_file(work / "calibration/vocab.txt")
        known = sum(1 for w in ptb_vocab if w in base_vocab)
        ptb_oov = {split: oov_stats(files[split], ptb_vocab) for split in ("valid", "test")}
        print(f"before (PTB vocabulary of {len(ptb_vocab):,} words, {known:,} known to the "
              "base; step 0 of continued training):", flush=True)
        lm0 = build_language_model(TrainConfig(**common_options, init_from=str(base)), ptb_vocab)
        rows.append({"label": "before: WT2 base, softmax on PTB vocab (step 0)",
                     "vocab_size": len(ptb_vocab), "perplexity": evaluate(lm0, ptb_vocab, files)})
        del lm0

        seconds_per_step = calib.seconds_per_step(skip=1)
        steps = max(2, int(0.97 * 60 * args.budget_minutes / seconds_per_step))
        print(f"calibration: {seconds_per_step:.2f} s/step -> {steps} steps fit "
              f"{args.budget_minutes:g} min", flush=True)

        # 2. continued training on PTB
        n_groups = len(layer_groups(base_lm))
        continued = TrainConfig(
            **common_options, init_from=str(base), discriminative_lr=args.discriminative_lr,
            gradual_unfreeze=args.gradual_unfreeze,
            unfreeze_every=max(1, steps // n_groups) if args.gradual_unfreeze else None,
            max_steps=steps, max_minutes=args.budget_minutes)
        rows.append(train_and_evaluate(f"after: continued on PTB ({args.budget_minutes:g} min)",
                                       continued, work / "continued", files))
        # 3. from scratch on PTB
        scratch = TrainConfig(**common_options, preset=scratch_preset, max_steps=steps,
                              max_minutes=args.budget_minutes)
        rows.append(train_and_evaluate(
            f"from scratch on PTB ({scratch_preset}, {args.budget_minutes:g} min)", scratch,
            work / "scratch", files))

        print_table(rows)
        before, after, fresh = (rows[1]["perplexity"]["test"]["average"],
                                rows[2]["perplexity"]["test"]["average"],
                                rows[3]["perplexity"]["test"]["average"])
        print(f"\nPTB test perplexity (average of both directions, PTB vocabulary): "
              f"{before:.1f} before -> {after:.1f} after {args.budget_minutes:g} min of "
              f"continued training; {fresh:.1f} from scratch in the same time.")
        print(f"OOV: {oov['test']['oov_tokens']:,} of {oov['test']['tokens']:,} PTB test "
              f"tokens ({oov['test']['oov_types']:,} types) are not in the base's vocabulary; "
              "the first row scores them as <UNK>, a class the base never had to predict. "
              f"The other rows use the {len(ptb_vocab):,}-word vocabulary of PTB train, "
              f"outside which are {100 * ptb_oov['valid']['oov_token_rate']:.2f}% of valid "
              f"and {100 * ptb_oov['test']['oov_token_rate']:.2f}% of test tokens.")
        print(f"yardstick: {KIM_2016_PTB['model']}, {KIM_2016_PTB['parameters']} parameters: "
              f"{KIM_2016_PTB['ptb_test_perplexity']} PTB test perplexity after full GPU "
              "training (forward only)")
        write_json(args.out, {
            "quick": args.quick, "machine": machine, "finished": time.strftime("%F %T %Z"),
            "base": {"path": str(base), "preset": arch, "finished": base_finished,
                     "vocab_size": len(base_vocab),
                     "parameters_bilm": n_parameters(base_lm.bilm),
                     "parameters_softmax": n_parameters(base_lm.softmax),
                     "valid_log": base_valid},
            "data": {k: str(v) for k, v in files.items()},
            "ptb_oov_against_base_vocab": oov, "ptb_oov_against_ptb_train_vocab": ptb_oov,
            "oov_handling": "the evaluator (and the trainer's batcher) map every word outside "
                            "the model's vocabulary to its <UNK> id (Vocabulary.encode), so "
                            "OOV tokens are scored as one <UNK> class; a vocabulary built "
                            "from the training data (the default) holds every training word, "
                            "so the WT2 base never had <UNK> as a target",
            "ptb_vocab_size": len(ptb_vocab), "ptb_vocab_known_to_base": known,
            "budget_minutes": args.budget_minutes, "calibration_seconds_per_step":
                seconds_per_step, "max_steps": steps,
            "rows": rows, "yardstick": KIM_2016_PTB,
            "claim_holds": after < before and after < fresh,
        })


if __name__ == "__main__":
    main()
