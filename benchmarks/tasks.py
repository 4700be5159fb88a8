"""+ELMo on six tasks (the paper's Tables 1-3 in small): test scores of task models trained
through `elmo.tasks.recipe.train_task` with and without the biLM's layers, mean and std over
seeds; the epoch speed over cached layers against recomputing the biLM (the shipped biLM, and
one of the paper's size with random weights); peak memory against dataset size.

Tasks (../shared/data): CoNLL-2003 NER (span F1), UD EWT POS (accuracy), SST-5 (accuracy), SICK
entailment (accuracy), MultiNLI (accuracy; its matched dev set of 9,815 pairs split in order:
the last 2,000 the test set, the 2,000 before them dev, the rest train; moses tokens; four
columns), MSRA NER (span F1, with a Chinese biLM: `--zh-model`, skipped when there is none),
SQuAD v1.1 (F1 and exact match; its dev set split by article as its README says: articles 1-34
train (7,628 questions), 35-38 dev (954), 39-48 test (1,988); moses tokens; BiLSTMs of 64 per
direction, as a CPU affords; four columns), CMRC 2018 (its trial set split by article: 1-180
train (714 questions), 181-205 dev (89), 206-256 test (199); `--metric cmrc`; character tokens,
answers up to 100 characters (its answers run long: median 19, 36% over 30); the Chinese biLM;
as SQuAD otherwise), CMRC 2018 dev set (`--cmrc-dev`: the dev file of ymcui/cmrc2018, 848
articles, 3,219 questions with three answers each; articles 1-550 train, cut to --train-size,
551-600 dev (222 questions), 601-848 test (973); as the trial row otherwise), OntoNotes SRL
(srl-f1; whole documents of the CoNLL-2012 files counted in predicates: train from the
training file, dev and then test from the development file, 3,000 test predicates unless
--test-size; four columns), OntoNotes coreference (coref-f1, the CoNLL
F1; the same files in whole documents, at most 200 per split, 100 test documents unless
--test-size; four columns).
Columns: the task model alone; layer 0 only (static, context-free); the top layer only; the
average; a learned mix with lambda 0.001 and with lambda 1; ELMo at the task RNN's input and
output; an adapted biLM (`elmo train --init-from` on the task's training text, on EWT POS,
SST-5 and the CMRC 2018 dev set); the biLM fine-tuned inside the task model (SST-5).

Training sets are cut to their first `--train-size` examples and dev sets to `--dev-size`
(whole test sets). The data slices, adapted biLMs and feature caches are made first, one task
after another; then the task runs (114 without SQuAD; 5 epochs each) go `--jobs` at a time,
each in its own process. With the defaults and `--jobs 2` (both cores) the whole benchmark took
107 minutes on this machine (2026-11-22, before SQuAD; two adaptations of 7-8 minutes, the runs
20 s to 6 minutes each); `--jobs 1` takes about twice as long for the runs. The JSON records
the wall time.

    python benchmarks/tasks.py --jobs 2 [--seeds 3 --epochs 5 --train-size 2000 --dev-size 1000]
    python benchmarks/tasks.py --quick      # smoke run on slices, one seed: minutes
    python benchmarks/tasks.py --tasks SQuAD --table-only --jobs 2 --work-dir runs/bench-tasks

`--full`: the table at full scale (issue 22): whole training sets (MSRA: its first 10,000
sentences), whole dev sets, at most `--epochs` (default 20) epochs with early stopping on dev
(`--patience` 3) and the best dev epoch's test score, 2 seeds; columns: the model alone (random
word embeddings), alone with word2vec vectors trained on the biLM's own training text
(`word2vec.py`, made on the first run), and, on top of those vectors, + layer 0 only and + ELMo
(learned mix at the input and output). SQuAD keeps the vectors fixed, as BiDAF kept its GloVe
(fine-tuned, they overfit: dev F1 25.7 against 35.6 for the model alone after 13 epochs).
Writes benchmarks/results/tasks_full.json; resumable with the same `--work-dir`:

    python benchmarks/tasks.py --full --jobs 2 --work-dir runs/bench-tasks-full
    python benchmarks/tasks.py --full --device cuda --jobs 4 --work-dir ...   # an accelerator

Measured on 2026-11-24 (alone, `--jobs 2`): CoNLL-2003, EWT, SST-5 and SICK, 32 runs, took 96
minutes (CoNLL and EWT runs 6-13 minutes each, SST-5 1-2.5, SICK 1-4.5). MSRA (10,000 sentences
of ~46 characters) and SQuAD (7,628 questions with their paragraphs) are several times slower
per run; split the table with `--tasks` over several sessions (the work directory keeps
finished runs and resumes a stopped one at its last epoch). Runs go seed by seed (every column
of seed 0 first, the longest first within a seed), so a table stopped partway has whole rows
of its first seeds.

Prints the table and writes benchmarks/results/tasks.json. Runs (and the feature cache) live in
`--work-dir`: run again with the same one to resume.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from common import DATA, REPO, add_run_options, machine_info, open_text, results_file, write_json

from elmo.cli.common import DefaultsHelpFormatter
from elmo.errors import ElmoError
from elmo.loading import load_model
from elmo.tasks.config import TaskConfig
from elmo.tasks.parallel import train_tasks
from elmo.tasks.recipe import train_task

# a row's columns (names of COLUMNS below): the slow rows have four; the biLM adapted to a
# task and the fine-tuned one only where a row names them
ALL_COLUMNS = ("alone", "layer 0", "top", "average", "learned, l2 0.001", "learned, l2 1",
               "input & output")
FOUR_COLUMNS = ("alone", "layer 0", "learned, l2 0.001", "input & output")


@dataclass
class Task:
    """A shared data set and how `elmo task train` reads it."""

    name: str
    task: str
    format: str
    train: Path
    dev: Path | None  # None: the last `held_out` examples of train
    test: Path | None  # None: the last `held_out` examples of train, before dev's; squad:
    # split by `articles`
    options: dict[str, Any] = field(default_factory=dict)
    header: bool = False  # tsv: the first line names the columns
    blocks: bool = False  # examples are blank-line-separated blocks (conll, conllu)
    chinese: bool = False  # needs the Chinese biLM
    held_out: int = 3000
    articles: tuple[int, int] | None = None  # squad: train articles [0, a), dev [a, b), test
    columns: tuple[str, ...] = ALL_COLUMNS  # its columns of the table (--full: FULL_COLUMNS)
    full_train_size: int | None = None  # --full: the first this many training examples
    freeze_word_vectors: bool = False  # static vectors kept fixed, as the paper's baseline did
    size_cap: int | None = None  # at most this many examples per split (coreference: documents,
    # slow to train on a CPU)
    file_option: str | None = None  # train is the file this option names (skipped without it)


TASKS = [
    Task("CoNLL-2003 NER", "tagging", "conll", DATA / "conll2003/eng.train",
         DATA / "conll2003/eng.testa", DATA / "conll2003/eng.testb",
         {"scheme": "iob1", "tag_column": -1}, blocks=True),
    Task("UD EWT POS", "tagging", "conllu", DATA / "ud-english-ewt/en_ewt-ud-train.conllu.gz",
         DATA / "ud-english-ewt/en_ewt-ud-dev.conllu",
         DATA / "ud-english-ewt/en_ewt-ud-test.conllu", {"tag": "upos"}, blocks=True,
         columns=(*ALL_COLUMNS, "adapted biLM")),
    Task("SST-5", "classification", "label-text", DATA / "sst5/stsa.fine.train",
         DATA / "sst5/stsa.fine.dev", DATA / "sst5/stsa.fine.test",
         columns=(*ALL_COLUMNS, "adapted biLM", "fine-tuned biLM")),
    Task("SICK entailment", "pair", "tsv", DATA / "sick/SICK_train.txt",
         DATA / "sick/SICK_trial.txt", DATA / "sick/SICK_test_annotated.txt",
         {"text_columns": ["sentence_A", "sentence_B"],
          "label_column": "entailment_judgment"}, header=True),
    Task("MSRA NER", "tagging", "conll", DATA / "msra-ner/msra_train_bio.gz", None,
         DATA / "msra-ner/msra_test_bio", {"scheme": "iob2"}, blocks=True, chinese=True,
         full_train_size=10_000),
    Task("SQuAD", "span", "squad", DATA / "squad-v1.1/dev-v1.1.json.gz", None, None,
         {"tokenizer": "moses", "hidden_dim": 64}, articles=(34, 38),
         columns=FOUR_COLUMNS,
         freeze_word_vectors=True),
    Task("MultiNLI", "pair", "nli", DATA / "mnli/dev.jsonl", None, None,
         {"tokenizer": "moses"}, held_out=2000,
         columns=FOUR_COLUMNS),
    Task("CMRC 2018", "span", "squad", DATA / "cmrc2018/cmrc2018_trial.json", None, None,
         {"tokenizer": "chars", "metric": "cmrc", "hidden_dim": 64, "max_answer_tokens": 100},
         chinese=True, articles=(180, 205),
         columns=FOUR_COLUMNS),
    Task("CMRC 2018 dev set", "span", "squad", Path("cmrc2018_dev.json"), None, None,
         {"tokenizer": "chars", "metric": "cmrc", "hidden_dim": 64, "max_answer_tokens": 100},
         chinese=True, articles=(550, 600),
         columns=(*FOUR_COLUMNS, "adapted biLM"),
         file_option="cmrc_dev"),
    Task("OntoNotes SRL", "srl", "conll2012",
         DATA / "ontonotes-conll2012/train.english.v4_gold_conll.xz",
         DATA / "ontonotes-conll2012/development.english.v4_gold_conll.xz", None,
         columns=FOUR_COLUMNS,
         full_train_size=10_000),
    Task("OntoNotes coreference", "coref", "conll2012",
         DATA / "ontonotes-conll2012/train.english.v4_gold_conll.xz",
         DATA / "ontonotes-conll2012/development.english.v4_gold_conll.xz", None,
         columns=FOUR_COLUMNS, held_out=100,
         size_cap=200),
]
# CoNLL-2012 rows: what --train-size, --dev-size and --test-size count, by task
CONLL2012_UNITS = {"srl": lambda document: document.count("(V*"),  # predicates
                   "coref": lambda document: 1}  # documents

# column -> TaskConfig fields; "elmo" is filled in per task (the biLM, or the adapted one)
COLUMNS: dict[str, dict[str, Any]] = {
    "alone": {"elmo": None},
    "layer 0": {"elmo_mix": "layer:0"},
    "top": {"elmo_mix": "top"},
    "average": {"elmo_mix": "average"},
    "learned, l2 0.001": {"elmo_mix": "learned", "l2": 0.001},
    "learned, l2 1": {"elmo_mix": "learned", "l2": 1.0},
    "input & output": {"elmo_mix": "learned", "l2": 0.001, "elmo_at": "both"},
    "adapted biLM": {"elmo_mix": "learned", "l2": 0.001, "adapted": True},
    "fine-tuned biLM": {"elmo_mix": "learned", "l2": 0.001, "fine_tune": True},
}
# --full: the columns of issue 22; "word_vectors" is filled in per task (English or Chinese)
FULL_COLUMNS: dict[str, dict[str, Any]] = {
    "alone": {"elmo": None},
    "alone + word2vec": {"elmo": None, "word_vectors": True},
    "w2v + layer 0": {"elmo_mix": "layer:0", "word_vectors": True},
    "w2v + ELMo, input & output": {"elmo_mix": "learned", "l2": 0.001, "elmo_at": "both",
                                   "word_vectors": True},
}


# ---- data slices -------------------------------------------------------------------------


def read_examples(task: Task, path: Path) -> tuple[list[str], list[str]]:
    """(header lines, examples as text) of a file in the task's format."""
    with open_text(path) as f:
        text = f.read()
    if task.blocks:
        blocks = [b.strip("\n") for b in text.split("\n\n") if b.strip()]
        header = [b for b in blocks[:1] if b.startswith("-DOCSTART-")]
        return header, [b for b in blocks if not b.startswith("-DOCSTART-")]
    lines = [line for line in text.split("\n") if line.strip()]
    return (lines[:1], lines[1:]) if task.header else ([], lines)


def write_examples(task: Task, header: list[str], examples: list[str], out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    sep = "\n\n" if task.blocks else "\n"
    out.write_text(sep.join(header + examples) + "\n", encoding="utf-8")
    return out


def task_files(task: Task, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Train (first --train-size), dev (first --dev-size) and test (whole, or --test-size)
    written under `work/data/`. Every dev and test example is kept and scored: gold labels
    (span types) the training slice lacks count as errors the model cannot avoid, and are
    recorded under "unseen" (label -> gold items)."""
    from elmo.tasks.data import build_labels, unseen_targets
    from elmo.tasks.readers import read_dataset

    if task.format == "squad":
        return squad_files(task, args, work)
    if task.format == "conll2012":
        return conll2012_files(task, args, work)
    folder = work / "data" / task.name.replace(" ", "_")
    header, train = read_examples(task, task.train)
    if task.test is None:
        train, test = train[: -task.held_out], train[-task.held_out :]
    else:
        test = read_examples(task, task.test)[1]
    if task.dev is None:
        train, dev = train[: -task.held_out], train[-task.held_out :]
    else:
        dev = read_examples(task, task.dev)[1]
    train_size = args.train_size if args.train_size is not None else task.full_train_size
    files: dict[str, Any] = {
        "train": write_examples(task, header, train[:train_size], folder / "train")}
    labels = build_labels(read_dataset(files["train"], task.format, **task.options))
    files["unseen"] = {}
    for split, examples, size in (("dev", dev, args.dev_size), ("test", test, args.test_size)):
        files[split] = write_examples(task, header, examples[:size], folder / split)
        parsed = read_dataset(files[split], task.format, **task.options)
        files["unseen"][split] = dict(unseen_targets(parsed, labels, task.options.get("scheme")))
    return files


def squad_files(task: Task, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Train, dev and test JSON files of the articles `task.articles` gives, each cut to its
    first --train-size, --dev-size, --test-size questions (whole paragraphs: a paragraph's
    questions share its text, so they stay in one split)."""
    with open_text(task.train) as f:
        data = json.load(f)
    first, last = task.articles
    articles = data["data"]
    files: dict[str, Any] = {"unseen": {"dev": {}, "test": {}}}  # spans have no labels
    for split, chosen, size in (("train", articles[:first], args.train_size),
                                ("dev", articles[first:last], args.dev_size),
                                ("test", articles[last:], args.test_size)):
        kept, count = [], 0
        for article in chosen:
            paragraphs = []
            for paragraph in article["paragraphs"]:
                if size is not None and count >= size:
                    break
                paragraphs.append(paragraph)
                count += len(paragraph["qas"])
            if paragraphs:
                kept.append({**article, "paragraphs": paragraphs})
        path = work / "data" / task.name / f"{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": data.get("version"), "data": kept},
                                   ensure_ascii=False), encoding="utf-8")
        files[split] = path
        files[f"{split}_questions"] = count
    return files


def conll2012_files(task: Task, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Whole documents of CoNLL-2012 files, counted in the task's CONLL2012_UNITS (SRL:
    predicates, `(V*`, one per argument column; coreference: documents), at most
    `size_cap`: the first of train holding --train-size; of the development file, the first
    holding --dev-size (dev), then the next holding --test-size, else `held_out` (test)."""
    from elmo.io.textfile import read_lines
    from elmo.tasks.data import unseen_targets
    from elmo.tasks.registry import TASKS as KINDS
    from elmo.tasks.srl_data import read_srl

    def documents(path: Path):
        lines: list[str] = []
        for _, line in read_lines(path):
            lines.append(line)
            if line.startswith("#end document"):
                yield "\n".join(lines) + "\n"
                lines = []

    folder = work / "data" / task.name.replace(" ", "_")
    folder.mkdir(parents=True, exist_ok=True)
    train_size = args.train_size if args.train_size is not None else task.full_train_size
    development = documents(task.dev)
    files: dict[str, Any] = {"unseen": {}}
    for split, source, size in (("train", documents(task.train), train_size),
                                ("dev", development, args.dev_size),
                                ("test", development, args.test_size or task.held_out)):
        if task.size_cap is not None:
            size = min(size or task.size_cap, task.size_cap)
        kept, count = [], 0
        for document in source:
            kept.append(document)
            count += CONLL2012_UNITS[task.task](document)
            if size is not None and count >= size:
                break
        files[split] = folder / f"{split}_gold_conll"
        files[split].write_text("".join(kept), encoding="utf-8")
        if task.task != "srl":  # only SRL's roles can be unseen
            continue
        instances = [i for i in read_srl(files[split]) if i.predicate is not None]
        if split == "train":
            labels = KINDS["srl"].labels(instances)
        else:
            files["unseen"][split] = dict(unseen_targets(instances, labels, "iob2"))
    return files


# ---- the biLMs ---------------------------------------------------------------------------


def adapt(task: Task, files: dict[str, Path], elmo: str, args: argparse.Namespace,
          work: Path) -> str:
    """Continue training the biLM `elmo` on the task's training text (paper section 2.4) with
    the ULMFiT options of `elmo train --init-from`; returns the model directory."""
    from common import run_training

    from elmo.tasks.readers import dataset_format
    from elmo.tasks.recipe import export_text
    from elmo.training import TrainConfig

    out = work / "adapted" / f"{task.name}_{Path(elmo).name}".replace(" ", "_")
    text = out.parent / f"{out.name}.txt"
    text.parent.mkdir(parents=True, exist_ok=True)
    reader = dataset_format(task.format)  # task.options holds model options too
    export_text(files["train"], text, task.format, **reader.reader_options(
        {"encoding_errors": "strict", **task.options}))
    config = TrainConfig(train=[str(text)], init_from=elmo, optimizer="adam", lr=1e-3,
                         discriminative_lr=2.6, schedule="slanted-triangular",
                         max_steps=args.adapt_steps, max_minutes=args.adapt_minutes,
                         checkpoint_every=10**9, eval_every=10**9, log_every=10**9,
                         device="cpu", seed=0)
    start = time.perf_counter()
    run = run_training(config, out)
    print(f"  adapted the biLM on {task.name}: {run.steps} steps, "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    return str(out)


# ---- the table ---------------------------------------------------------------------------


def cell_config(task: Task, column: str, elmo: str | None, files: dict[str, Path], seed: int,
                args: argparse.Namespace, work: Path) -> TaskConfig:
    """The run of one cell and seed (a finished run returns its stored result)."""
    options = {k: v for k, v in args.columns[column].items() if k != "adapted"}
    options.setdefault("elmo", elmo)
    options.setdefault("elmo_at", "input")  # a column names another placement
    if options.get("word_vectors"):
        options["word_vectors"] = str(args.zh_vectors if task.chinese else args.vectors)
        options["freeze_word_vectors"] = task.freeze_word_vectors
    out = work / "runs" / task.name.replace(" ", "_") / column.replace(" ", "_") / f"seed{seed}"
    return TaskConfig(task=task.task, format=task.format, train=str(files["train"]),
                      dev=str(files["dev"]), test=str(files["test"]), out=str(out), seed=seed,
                      epochs=args.epochs, patience=args.patience, cache_dir=str(args.cache_dir),
                      device=args.device, progress=False, **task.options, **options)


def plan(tasks: list[Task], args: argparse.Namespace, work: Path
         ) -> tuple[dict[str, Any], list[tuple[Task, str, str, dict[str, Any]]]]:
    """Data slices and adapted biLMs, made one task after another; returns the skipped tasks'
    rows and the (task, column, biLM, files) of every cell to run."""
    skipped: dict[str, Any] = {}
    cells = []
    for task in tasks:
        elmo = args.zh_model if task.chinese else args.model
        if task.chinese and not model_available(elmo):
            print(f"{task.name}: skipped, no Chinese biLM {elmo!r} (give --zh-model)")
            skipped[task.name] = {"skipped": f"no Chinese biLM {elmo!r}"}
            continue
        if task.file_option:
            option = "--" + task.file_option.replace("_", "-")
            if getattr(args, task.file_option) is None:
                print(f"{task.name}: skipped, give {option} {task.train}")
                skipped[task.name] = {"skipped": f"no {option}"}
                continue
            task = replace(task, train=getattr(args, task.file_option))
        files = task_files(task, args, work)
        for column, options in args.columns.items():
            if column not in task.columns and not args.full:
                continue
            model = adapt(task, files, elmo, args, work) if options.get("adapted") else elmo
            cells.append((task, column, model, files))
    return skipped, cells


def table(tasks: list[Task], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Every cell over `--seeds` seeds, `--jobs` runs at a time; rows of the table."""
    torch.set_num_threads(args.threads * args.jobs)  # the machine is ours until the runs start
    skipped, cells = plan(tasks, args, work)
    # seed-major: a table stopped halfway has every cell of its first seeds; within a seed the
    # cells go in reverse (the slow tasks and the heavy columns are listed last), so the pool
    # starts the long runs first and ends on short ones
    jobs = [((task, column, seed), cell_config(task, column, model, files, seed, args, work))
            for seed in range(args.seeds) for task, column, model, files in reversed(cells)]
    print(f"{len(jobs)} task runs, {args.jobs} at a time", flush=True)
    results: dict[tuple[str, str, int], dict[str, Any]] = {}
    for i, result in train_tasks([config for _, config in jobs], args.jobs, args.threads):
        task, column, seed = jobs[i][0]
        results[task.name, column, seed] = result
        print(f"  {task.name} | {column} | seed {seed}: {result['test']:.2f}, best dev epoch "
              f"{result['best_epoch']} of {result['epochs']} "
              f"({result['wall_seconds']:.0f} s; {len(results)}/{len(jobs)} runs)", flush=True)
    torch.set_num_threads(args.threads)
    rows: dict[str, Any] = {}
    for task in tasks:
        if task.name in skipped:
            rows[task.name] = skipped[task.name]
            continue
        row = rows[task.name] = {}
        for _, column, _, files in (c for c in cells if c[0].name == task.name):
            runs = [results[task.name, column, seed] for seed in range(args.seeds)]
            scores = [r["test"] for r in runs]
            row[column] = {"mean": statistics.fmean(scores), "unseen": files["unseen"],
                           "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
                           "metric": runs[0]["metric"], "runs": runs}
            if "test_exact_match" in runs[0]:
                row[column]["exact_match"] = statistics.fmean(r["test_exact_match"]
                                                              for r in runs)
    return rows


def format_cell(cell: dict[str, Any] | None) -> str:
    if not cell:
        return f"{'':>13s}"
    em = f" (EM {cell['exact_match']:.2f})" if "exact_match" in cell else ""
    return f"{cell['mean']:6.2f} ± {cell['std']:4.2f}{em}"


def print_table(rows: dict[str, Any], columns: dict[str, Any]) -> None:
    names = list(columns)
    print("\n| task | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for task, row in rows.items():
        if "skipped" in row:
            print(f"| {task} | {row['skipped']} |")
            continue
        print(f"| {task} | " + " | ".join(format_cell(row.get(c)).strip() or "-"
                                         for c in names) + " |")


def model_available(model: str) -> bool:
    try:
        load_model(model, progress=False)
    except ElmoError:
        return False
    return True


def static_vectors(tasks: list[Task], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The word2vec vectors of the --full table (trained on the biLMs' own text when their
    files are not given and not yet made); returns what each is."""
    from word2vec import train_word2vec

    made = {}
    for chinese, attr, corpus in ((False, "vectors", "default"), (True, "zh_vectors",
                                                                   "default-zh")):
        if not any(t.chinese == chinese for t in tasks):
            continue
        if getattr(args, attr) is None:
            setattr(args, attr, work / "word2vec" / f"{corpus}.vec")
            print(f"word2vec on the text of {corpus} -> {getattr(args, attr)}", flush=True)
            made[corpus] = train_word2vec(corpus, getattr(args, attr), workers=args.jobs)
        else:
            made[corpus] = {"vectors": str(getattr(args, attr))}
    return made


# ---- speed and memory --------------------------------------------------------------------


def paper_size_model(work: Path) -> str:
    """A biLM of the paper's size (preset `original`) with random weights, saved once: how
    fast an epoch is depends on the biLM's size, not on its weights."""
    from elmo.config import BiLMConfig
    from elmo.loading.formats import save_pretrained
    from elmo.modules.bilm import BiLM

    out = work / "original-size-random"
    if not (out / "model.safetensors").exists():
        torch.manual_seed(0)
        save_pretrained(BiLM(BiLMConfig.preset("original")), out)
    return str(out)


def epoch_speed(model: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Seconds of one training epoch of the EWT POS tagger (ELMo at the input, learned mix)
    over cached layers and over layers the biLM `model` recomputes for every batch."""
    from elmo.tasks.data import build_labels, build_vocab
    from elmo.tasks.recipe import read_split
    from elmo.tasks.run import Run, resolve_config

    task = TASKS[1]
    files = task_files(task, args, work)
    config = resolve_config(TaskConfig(
        task=task.task, format=task.format, train=str(files["train"]), dev=str(files["dev"]),
        out=str(work / "speed"), elmo=model, cache_dir=str(args.cache_dir), device="cpu",
        progress=False, **task.options))
    train = read_split(config, config.train)
    run = Run(config, build_vocab(train), build_labels(train))
    encoded = run.encode(train, run.targets(train))
    store = run.layers(train)  # built before the clock starts: the cache exists
    optimizer = torch.optim.Adam(run.model.parameters(), lr=1e-3)

    def epoch(recompute: bool) -> float:
        start = time.perf_counter()
        run.model.train()
        for indices in encoded.batches(config.batch_size, 0):
            batch = encoded.batch(indices)
            if recompute:
                with torch.no_grad():
                    layers = run.bilm(batch.char_ids()).layers
            else:
                layers = store.batch(batch.sentence_ids)[0]
            loss = run.model.task.loss(run.model(batch, layers), batch.targets, batch.mask)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return time.perf_counter() - start

    epoch(False)  # warm-up: first-call allocations
    cached, recomputed = epoch(False), epoch(True)
    store.close()
    result = {"sentences": len(train), "cached_seconds": cached,
              "recomputed_seconds": recomputed, "speedup": recomputed / cached}
    print(f"epoch over {len(train)} EWT sentences: cached layers {cached:.1f} s, biLM "
          f"recomputed {recomputed:.1f} s: {result['speedup']:.1f}x", flush=True)
    return result


def peak_memory(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """Peak RSS of a whole task run (a fresh process each) at growing training-set sizes."""
    rows = []
    for size in args.memory_sizes:
        cmd = [sys.executable, __file__, "--memory-run", str(size), "--work-dir", str(work),
               "--model", args.model, "--cache-dir", str(args.cache_dir),
               "--threads", str(args.threads)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"peak RSS of a task run on {size} EWT sentences: "
              f"{rows[-1]['peak_rss_mb']:.0f} MB", flush=True)
    return rows


def memory_run(size: int, args: argparse.Namespace, work: Path) -> None:
    """One EWT POS run on `size` sentences (one epoch); prints its peak RSS as JSON."""
    args.train_size, args.dev_size, args.test_size, args.epochs = size, 200, 200, 1
    task = TASKS[1]
    files = task_files(task, args, work / f"memory{size}")
    train_task(cell_config(task, "learned, l2 0.001", args.model, files, 0, args,
                           work / f"memory{size}"))
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"train_sentences": size, "peak_rss_mb": peak_kb / 1024}))


# ---- main --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=DefaultsHelpFormatter)
    parser.add_argument("--model", default="default", help="the English biLM")
    parser.add_argument("--zh-model", default="default-zh",
                        help="the Chinese biLM (MSRA, CMRC 2018)")
    parser.add_argument("--seeds", type=int, help="seeds per cell (default: 3; --full: 2)")
    parser.add_argument("--epochs", type=int,
                        help="task training epochs, at most (default: 5; --full: 20)")
    parser.add_argument("--patience", type=int, default=3,
                        help="stop a run after this many epochs without a better dev score")
    parser.add_argument("--train-size", type=int, default=2000,
                        help="training examples (--full: all)")
    parser.add_argument("--dev-size", type=int, default=1000, help="dev examples (--full: all)")
    parser.add_argument("--test-size", type=int, default=None, help="test examples (all)")
    parser.add_argument("--adapt-steps", type=int, default=300, help="biLM adaptation steps")
    parser.add_argument("--adapt-minutes", type=float, default=10.0,
                        help="biLM adaptation time limit per task")
    parser.add_argument("--tasks", nargs="+", choices=[t.name for t in TASKS], metavar="TASK",
                        help="only these tasks (default: all)")
    parser.add_argument("--columns", nargs="+", metavar="COLUMN",
                        help="only these columns of the table (default: all; names as its "
                        f"header: {', '.join(COLUMNS)}; --full: {', '.join(FULL_COLUMNS)})")
    parser.add_argument("--cache-dir", type=Path, help="feature cache (default: WORK/features)")
    parser.add_argument("--memory-sizes", type=int, nargs="+", default=[500, 2000, 8000],
                        help="training-set sizes of the peak-memory runs")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (small task models: 1 is as fast, and immune to "
                        "OpenMP spin-waits on a busy machine)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="task runs at a time, each in its own process with --threads "
                        "threads (2 on this 2-core machine halves the wall time)")
    parser.add_argument("--device", default="cpu", help="where the task runs train")
    parser.add_argument("--table-only", action="store_true",
                        help="only the table: no epoch-speed and peak-memory measurements")
    parser.add_argument("--full", action="store_true",
                        help="the full-scale table (see above): whole data sets, converged "
                        "runs, word2vec baseline; table only")
    parser.add_argument("--word-vectors", dest="vectors", type=Path,
                        help="--full: English static vectors (default: WORK/word2vec/"
                        "default.vec, trained by word2vec.py on WikiText-2 train if absent)")
    parser.add_argument("--cmrc-dev", type=Path,
                        help="CMRC 2018's dev set (squad-style-data/cmrc2018_dev.json of "
                        "ymcui/cmrc2018, 3,219 questions) for the 'CMRC 2018 dev set' row")
    parser.add_argument("--zh-word-vectors", dest="zh_vectors", type=Path,
                        help="--full: Chinese ones (default: WORK/word2vec/default-zh.vec, on "
                        "the zh-raw-text training split)")
    parser.add_argument("--memory-run", type=int, help=argparse.SUPPRESS)
    add_run_options(parser, "smoke run on slices (100 train / 50 dev / 50 test), one seed, "
                    "one epoch: minutes")
    args = parser.parse_args()
    args.seeds = args.seeds or (2 if args.full else 3)
    args.epochs = args.epochs or (20 if args.full else 5)
    all_columns = FULL_COLUMNS if args.full else COLUMNS
    unknown = set(args.columns or ()) - set(all_columns)
    if unknown:
        parser.error(f"no column {', '.join(sorted(unknown))} in this table: "
                     f"choose from {', '.join(all_columns)}")
    args.columns = {name: options for name, options in all_columns.items()
                    if name in (args.columns or all_columns)}
    if args.full:
        args.train_size = args.dev_size = None
        args.table_only = True
    if args.quick:
        args.seeds, args.epochs, args.train_size, args.dev_size = 1, 1, 100, 50
        args.test_size, args.adapt_steps, args.memory_sizes = 50, 5, [100, 400]
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="elmo-bench-tasks-") as tmp:
        work = args.work_dir or Path(tmp)
        args.cache_dir = args.cache_dir or work / "features"
        if args.memory_run:
            memory_run(args.memory_run, args, work)
            return
        info = machine_info()
        start = time.perf_counter()
        tasks = [t for t in TASKS if not args.tasks or t.name in args.tasks]
        vectors = static_vectors(tasks, args, work) if args.full else {}
        rows = table(tasks, args, work)
        speed, memory = {}, []
        if not args.table_only:
            for name, model in (("shipped", args.model), ("paper size", paper_size_model(work))):
                print(f"epoch speed, {name} biLM:", flush=True)
                speed[name] = epoch_speed(model, args, work)
            memory = peak_memory(args, work)
        print_table(rows, args.columns)
        name = "tasks_full.json" if args.full else "tasks.json"
        write_json(args.out or results_file(name, args.quick), {
            "model": args.model, "zh_model": args.zh_model, "seeds": args.seeds,
            "epochs": args.epochs, "patience": args.patience, "full": args.full,
            "train_size": args.train_size, "dev_size": args.dev_size,
            "test_size": args.test_size, "threads": args.threads, "jobs": args.jobs,
            "device": args.device, "word_vectors": vectors,
            "wall_seconds": time.perf_counter() - start,
            "machine": info, "table": rows, "epoch_speed": speed, "peak_memory": memory})


if __name__ == "__main__":
    main()
