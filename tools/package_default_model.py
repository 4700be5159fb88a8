"""Package a finished `elmo train` run as a model that ships inside the package.

Stores the biLM and its softmax in fp16 in `src/elmo/pretrained/NAME/` (config.json,
model.safetensors, vocab.txt), evaluates the stored weights (not the fp32 originals) on each
`--eval` text with the run's tokenizer, and writes the facts to `card.json` and the model card
`MODEL_CARD.md` rendered from them. Paths in the card are relative to the repository (data in
`../shared`, beside the checkout). Run from the repository root:

    python tools/package_default_model.py runs/wikitext2-compact --command-file CMD.txt
    python tools/package_default_model.py runs/zh-chars --name default-zh \\
        --command-file CMD.txt --data-name "..." --eval "held-out=../shared/.../test.txt"
    python tools/package_default_model.py --render default   # MODEL_CARD.md from card.json

`--render` rewrites the card's text from its recorded facts (no training run needed);
`--command-file` and `--notes-file` there replace the recorded command and notes. Each text is
also scored on its first sentences alone, a figure `elmo perplexity` reproduces in seconds
(the tests check it; `benchmarks/shipped_perplexity.py` checks every figure of the card).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from elmo.config import BiLMConfig
from elmo.data.corpus import expand_paths, iter_sentences
from elmo.embed import Embedder
from elmo.io.atomic import atomic_write_text
from elmo.loading import load_pretrained
from elmo.loading.formats import save_pretrained
from elmo.loading.formats.native import RUN_NAME, VOCAB_NAME, WEIGHTS_NAME
from elmo.loading.resolve import CARD_NAME, DEFAULT_MODEL
from elmo.modules.language_model import resolve_softmax
from elmo.tokenize import get_tokenizer
from elmo.training.config import DEFAULT_LR, DEFAULT_PRESET
from elmo.training.evaluate import evaluate_perplexity
from elmo.training.model_init import load_language_model

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ELMO_SHARED", REPO.parent / "shared"))
PRETRAINED = REPO / "src" / "elmo" / "pretrained"  # the shipped models of this checkout
CARD_TEXT = "MODEL_CARD.md"
FP16_SENTENCES = 200  # sentences of the first --eval text on which fp16 storage is measured
FIRST_SENTENCES = 100  # each --eval text is also scored on its first sentences alone
ENGLISH_EVALS = [  # --eval for `default` when none is given
    "wikitext-2 valid=../shared/data/wikitext-2/valid.txt",
    "wikitext-2 test=../shared/data/wikitext-2/test.txt",
    "ptb test=../shared/data/ptb/ptb.test.txt",
]


def repo_relative(path: str | Path) -> str:
    """`path` as the card shows it: relative to the repository root, data as `../shared/...`."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    for root, shown in ((SHARED.resolve(), Path("../shared")), (REPO, Path("."))):
        if path.resolve().is_relative_to(root):
            return str(shown / path.resolve().relative_to(root))
    return str(path)


def relative_command(command: str) -> str:
    """A shell command with its absolute paths under the repository or ../shared made
    relative (so it runs from any checkout's root); warns about the ones that stay."""
    tokens = [repo_relative(token) if token.startswith("/") else token
              for token in shlex.split(command)]
    machine = [token for token in tokens if token.startswith("/")]
    if machine:
        print(f"warning: the card's command names paths of this machine: {machine}",
              file=sys.stderr)
    return shlex.join(tokens)


def from_repo(shown: str) -> Path:
    """A path as the card shows it -> a path that opens from here."""
    path = Path(shown)
    if path.parts[:2] == ("..", "shared"):
        return SHARED.joinpath(*path.parts[2:])
    return path if path.is_absolute() else REPO / path


def perplexities(model_dir: Path, evals: dict[str, str], tokenizer: str) -> dict[str, dict]:
    """Each text's perplexity, whole and on its first FIRST_SENTENCES sentences."""
    lm, vocab = load_language_model(model_dir)
    results = {}
    for name, shown in evals.items():
        paths = expand_paths([str(from_repo(shown))])
        totals = evaluate_perplexity(lm, iter_sentences(paths, tokenizer), vocab, 64)
        first = list(islice(iter_sentences(paths, tokenizer), FIRST_SENTENCES))
        results[name] = {**totals.to_dict(), "file": shown, "first_sentences": {
            "sentences": len(first), **evaluate_perplexity(lm, first, vocab, 64).to_dict()}}
        print(f"{name}: perplexity forward {totals.forward:.1f}, backward {totals.backward:.1f}, "
              f"average {totals.average:.1f}")
    return results


def fp16_cost(run_dir: Path, shipped: Path, text: Path, tokenizer: str) -> tuple[float, int]:
    """Max |difference| of all layers, fp16-stored vs fp32 weights, on the first sentences;
    and how many sentences that was."""
    sentences = []
    for words in iter_sentences([text], get_tokenizer(tokenizer)):
        sentences.append(words)
        if len(sentences) == FP16_SENTENCES:
            break
    full = Embedder.from_pretrained(run_dir).embed_sentences(sentences)
    half = Embedder.from_pretrained(shipped).embed_sentences(sentences)
    diff = max(np.abs(a - b).max() for a, b in zip(full, half, strict=True))
    return float(diff), len(sentences)


def wall_minutes(run_dir: Path, metrics: list[dict]) -> float:
    """The run's wall clock: its last logged "minutes" (newer runs log the wall clock since the
    first step), else the time from run.json to the last weights written."""
    logged = [m["minutes"] for m in metrics if "valid_ppl" in m and "minutes" in m]
    if logged:
        return max(logged)
    return ((run_dir / WEIGHTS_NAME).stat().st_mtime - (run_dir / RUN_NAME).stat().st_mtime) / 60


def training_record(run_dir: Path) -> dict:
    """Steps, tokens, time and the validation curve of a run, from run.json and metrics."""
    run = json.loads((run_dir / RUN_NAME).read_text())
    config = run["config"]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    tokens_per_step = config["batch_size"] * config["unroll_steps"] * run.get("world_size", 1)
    # Training minutes at each logged step, from the logged speed.
    # Runs before the trainer paused its clock for validation counted it in the next window's
    # speed: those windows are left out of the mean speed.
    valid_steps = {m["step"] for m in metrics if "valid_ppl" in m}
    minutes, last_step, clock, speeds = {}, 0, 0.0, []
    for m in sorted((m for m in metrics if "train_loss" in m), key=lambda m: m["step"]):
        clock += (m["step"] - last_step) * tokens_per_step / m["tokens_per_s"] / 60
        if last_step not in valid_steps:
            speeds.append(m["tokens_per_s"])
        minutes[m["step"]], last_step = clock, m["step"]
    # "minutes" in a validation line (newer runs) is wall clock, validation included.
    valid = [{**m, "minutes": minutes.get(m["step"]), "wall_minutes": m.get("minutes")}
             for m in metrics if "valid_ppl" in m]
    steps = max(m["step"] for m in metrics)
    config["train"] = [repo_relative(p) for p in config["train"]]
    config["valid"] = config["valid"] and repo_relative(config["valid"])
    config["init_from"] = config["init_from"] and repo_relative(config["init_from"])
    return {
        "steps": steps,
        "tokens_seen": steps * tokens_per_step,
        "epochs": steps * tokens_per_step / run["n_tokens"],
        "corpus_tokens": run["n_tokens"],
        "mean_tokens_per_s": float(np.mean(speeds)),
        "wall_minutes": wall_minutes(run_dir, metrics),
        "validation": valid,
        "config": config,
    }


CARD = """# Shipped model `{name}`: {origin} trained on {data_name}

`elmo embed {name} ...`, `elmo perplexity {name} FILE`, `Embedder.from_pretrained("{name}")`
and `load_pretrained("{name}")` use it. It is small and briefly trained (the tables below), so
it demonstrates the pipeline; for real work train your own{released}.

| | |
|---|---|
| architecture | {architecture} |
| parameters | {params:,} (biLM) + {softmax_params:,} (tied softmax) |
| storage | fp16 safetensors, {size_mb:.1f} MB; loaded as fp32. Largest change of any output value against the fp32 weights on {fp16_text}: {fp16_diff:.1e} |
| tokenizer | `{tokenizer}` (recorded in `card.json`; text is split this way before embedding and scoring) |
| data | {train_files}: {corpus_tokens:,} tokens with `</S>`, each line a sentence; vocabulary of {vocab:,} words |
| training | {steps:,} steps of {batch} x {unroll} tokens ({tokens_seen:,} tokens, {epochs:.2f} epochs), {optimizer}, dropout {dropout}, {softmax}, gradient norm clipped at {clip:g}, seed {seed} |
| time | {wall:.0f} minutes wall clock on 2 CPU cores, {tps:.0f} tokens/s (per direction) |

Command (run from the repository root; the data is `../shared`, beside the checkout):

```
{command}
python tools/package_default_model.py {run_dir} --name {name} --command-file <file holding the command above>
```

Perplexity of the shipped weights (`elmo perplexity {name} FILE`: exact softmax; every line
scored as one sentence from a zero state, `<S> w1 .. wn </S>`, n + 1 predictions per direction;
words outside the vocabulary are scored as `<UNK>`):

| text | file | forward | backward | average | tokens |
|---|---|---|---|---|---|
{perplexity_rows}
{first_sentences}
{validation}
{notes}"""


def describe_architecture(config: BiLMConfig, preset: str | None) -> str:
    widths = [w for w, _ in config.filters]
    residual = ", residual connections" if config.use_skip_connections else ""
    return (f"{f'preset `{preset}`: ' if preset else ''}char-CNN with {config.n_filters} filters "
            f"(widths {min(widths)}-{max(widths)}), {config.n_highway} highway "
            f"layer{'' if config.n_highway == 1 else 's'}, "
            f"projection to {config.projection_dim}; {config.n_layers} LSTM layers per "
            f"direction, cell {config.lstm_dim}, projection {config.projection_dim}, "
            f"{'no clipping' if config.cell_clip is None else f'clipping {config.cell_clip:g}'}"
            f"{residual}")


def validation_table(validation: list[dict]) -> str:
    """The validation curve as a Markdown table: perplexity against steps and minutes (the
    wall clock where the run recorded it, else training time from the logged speed)."""
    wall = all(v.get("wall_minutes") for v in validation)
    rows = ["| step | epoch | minutes | forward | backward | average |", "|---|---|---|---|---|---|"]
    for v in validation:
        minutes = v["wall_minutes"] if wall else v.get("minutes")
        rows.append(f"| {v['step']:,} | {v['epoch']:.2f} | "
                    + (f"{minutes:.1f}" if minutes else "-") + " | "
                    + " | ".join(f"{v[k]:.1f}" for k in ("valid_ppl_forward",
                                                         "valid_ppl_backward", "valid_ppl"))
                    + " |")
    note = ("Minutes: the wall clock since the run's first step, validation included."
            if wall else "Minutes: training time from the logged speed.")
    return "\n".join(rows) + "\n\n" + note


def first_sentences_table(perplexity: dict[str, dict]) -> str:
    """Each text's perplexity on its first sentences alone, as a Markdown table ("" for a card
    written before that was measured)."""
    rows = [f"| {name} | {f['sentences']} | {f['forward']:.1f} | {f['backward']:.1f} "
            f"| {f['average']:.1f} | {f['tokens']:,} |"
            for name, r in perplexity.items() if (f := r.get("first_sentences"))]
    if not rows:
        return ""
    return ("\nThe same on the first sentences (non-blank lines) of each text alone, a figure\n"
            "`elmo perplexity` reproduces in seconds:\n\n"
            "| text | sentences | forward | backward | average | tokens |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def render(directory: Path, card: dict) -> str:
    """MODEL_CARD.md from card.json's facts and the weights in `directory`."""
    bilm, extra = load_pretrained(directory)
    record, config = card["training"], card["training"]["config"]
    vocab_size = len((directory / VOCAB_NAME).read_text(encoding="utf-8").splitlines())
    softmax_mode = resolve_softmax(config["softmax"], vocab_size)
    softmax = ("sampled softmax ({:,} candidates)".format(config["num_samples"])
               if softmax_mode == "sampled" else "full softmax")
    lr = config["lr"] if config["lr"] is not None else DEFAULT_LR[config["optimizer"]]
    optimizer = f"{config['optimizer'].capitalize()} lr {lr:g}"
    if config["schedule"] != "constant":
        optimizer += f", {config['schedule']} schedule"
    preset = config["preset"] or DEFAULT_PRESET
    origin = (f"`{preset}` biLM" if config["init_from"] is None
              else f"biLM continued from `{config['init_from']}`")
    rows = "\n".join(f"| {name} | `{r['file']}` | {r['forward']:.1f} | {r['backward']:.1f} "
                     f"| {r['average']:.1f} | {r['tokens']:,} |"
                     for name, r in card["perplexity"].items())
    validation = (f"Validation during training (`{config['valid']}`), the perplexity curve:\n\n"
                  + validation_table(record["validation"])
                  if record["validation"] else "No validation during training.")
    return CARD.format(
        name=card["name"], origin=origin, data_name=card["data_name"],
        released=" or use a released model (`small`, `medium`, `original`)"
        if card["tokenizer"] == "whitespace" else "",
        architecture=describe_architecture(
            bilm.config, preset if config["init_from"] is None else None),
        params=sum(p.numel() for p in bilm.parameters()),
        softmax_params=sum(t.numel() for t in extra.values()),
        size_mb=(directory / WEIGHTS_NAME).stat().st_size / 2**20,
        fp16_text=card["fp16_text"], fp16_diff=card["fp16_max_abs_diff"],
        tokenizer=card["tokenizer"],
        train_files=", ".join(f"`{p}`" for p in config["train"]),
        corpus_tokens=record["corpus_tokens"], vocab=vocab_size, steps=record["steps"],
        batch=config["batch_size"], unroll=config["unroll_steps"],
        tokens_seen=record["tokens_seen"], epochs=record["epochs"], optimizer=optimizer,
        dropout=config["dropout"], softmax=softmax, clip=config["clip_norm"],
        seed=config["seed"], wall=record["wall_minutes"], tps=record["mean_tokens_per_s"],
        command=card["command"], run_dir=card["run_dir"], perplexity_rows=rows,
        first_sentences=first_sentences_table(card["perplexity"]), validation=validation,
        notes=f"\n{card['notes'].strip()}\n" if card.get("notes") else "",
    )


def write_card(directory: Path, card: dict) -> None:
    atomic_write_text(directory / CARD_NAME, json.dumps(card, indent=2) + "\n")
    atomic_write_text(directory / CARD_TEXT, render(directory, card))
    print(f"wrote {directory / CARD_NAME} and {directory / CARD_TEXT}")


def package(args: argparse.Namespace, out: Path) -> dict:
    """Store the run's weights in `out`, evaluate them; the card's facts."""
    run_dir = args.run_dir
    tokenizer = json.loads((run_dir / RUN_NAME).read_text())["config"]["tokenizer"]
    evals = dict(item.split("=", 1) for item in (args.eval or ENGLISH_EVALS))
    lm, vocab = load_language_model(run_dir)
    softmax = {f"softmax.{k}": v for k, v in lm.softmax.state_dict().items()}
    save_pretrained(lm.bilm, out, extra_tensors=softmax, dtype=torch.float16)
    vocab.save(out / VOCAB_NAME)
    first_name, first_file = next(iter(evals.items()))
    fp16_diff, fp16_sentences = fp16_cost(run_dir, out, from_repo(first_file), tokenizer)
    return {
        "name": args.name,
        "data_name": args.data_name,
        "tokenizer": tokenizer,
        "command": relative_command(args.command_file.read_text().strip()),
        "run_dir": repo_relative(run_dir.resolve()),
        "training": training_record(run_dir),
        "perplexity": perplexities(out, evals, tokenizer),
        "fp16_max_abs_diff": fp16_diff,
        "fp16_text": f"the first {fp16_sentences} sentences of {first_name}",
        "notes": args.notes_file.read_text() if args.notes_file else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, nargs="?", help="the `elmo train` output")
    parser.add_argument("--name", default=DEFAULT_MODEL,
                        help=f"shipped model name, a directory of src/elmo/pretrained "
                        f"(default {DEFAULT_MODEL}; e.g. default-zh)")
    parser.add_argument("--render", metavar="NAME",
                        help="only rewrite NAME's MODEL_CARD.md from its card.json")
    parser.add_argument("--command-file", type=Path, help="file holding the training command")
    parser.add_argument("--notes-file", type=Path, help="Markdown appended to the card")
    parser.add_argument("--data-name", default="WikiText-2", help="the data, as the title names "
                        "it (default WikiText-2)")
    parser.add_argument("--eval", action="append", metavar="NAME=FILE",
                        help="a held-out text to score, repeatable (default for `default`: "
                        "WikiText-2 valid and test, PTB test)")
    args = parser.parse_args()
    if args.render:
        directory = PRETRAINED / args.render
        card = json.loads((directory / CARD_NAME).read_text())
        if args.command_file:
            card["command"] = relative_command(args.command_file.read_text().strip())
        if args.notes_file:
            card["notes"] = args.notes_file.read_text()
        write_card(directory, card)
        return
    if args.run_dir is None or args.command_file is None:
        parser.error("give RUN_DIR and --command-file (or --render NAME)")
    if args.eval is None and args.name != DEFAULT_MODEL:
        parser.error(f"--eval is needed for {args.name}: the English test sets are the "
                     f"default only for {DEFAULT_MODEL}")
    out = PRETRAINED / args.name
    write_card(out, package(args, out))


if __name__ == "__main__":
    main()
