"""The task recipe: read the splits, build the run, fit, test; evaluate and predict with a
finished run. Every task type (tagging, classification, pair, span) goes through it; what
differs lives in its `TaskType` (`elmo.tasks.registry.TASKS`), the model and its epoch loop in
`elmo.tasks.run`, the run directory's claim and checkpoint in `elmo.runs`.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from elmo.errors import ElmoError
from elmo.io.atomic import atomic_write_text
from elmo.loading.formats.native import is_native_dir
from elmo.loading.load import load_model
from elmo.loading.resolve import find_official_pair
from elmo.runs import METRICS_NAME, TASK, changed_options, claim_run_folder
from elmo.tasks.config import RESUMABLE_CHANGES, TaskConfig
from elmo.tasks.data import build_vocab, flat_sentences, held_out_split, nested_sample
from elmo.tasks.readers import FORMATS, read_dataset
from elmo.tasks.registry import TASKS
from elmo.tasks.run import (
    RUN_FILES,
    Run,
    feature_store,
    fit,
    resolve_config,
    run_config,
    saved_run,
)


def train_task(config: TaskConfig, overwrite: bool = False) -> dict[str, Any]:
    """Train (or resume, or return the result of) the run `config.out`; returns the result:
    metric, best dev score, test score (with a test file), best epoch, layer weights.

    `config.out` must be new, empty, or this run's (resumed); a run of other options is
    replaced, and other files kept beside the run, only with `overwrite`; a biLM never. One
    process at a time writes it ("another process is writing OUT")."""
    config = resolve_config(config)
    out = Path(config.out)
    with claim_run_folder(out, TASK) as ours:
        _make_room(out, config, ours, overwrite)
        finished = _finished_result(out, config)
        if finished is not None:
            return finished
        # read the splits
        train_all, dev, _, labels = read_splits(config)
        sample = nested_sample(len(train_all), config.train_fraction, config.seed)
        notes = {"train": data_notes(config, train_all), "dev": data_notes(config, dev)}
        # build the run: new, or the one its checkpoint resumes
        run = Run.start(config, build_vocab([train_all[i] for i in sample]), labels, notes)
        targets = run.targets(train_all)
        trained = [i for i in sample if targets[i] is not None]
        if not trained:
            raise ElmoError(f"{config.train}: no training example has a usable target (see "
                            "the data notes above)")
        # fit (the feature cache holds the whole training file; the sample is a subset of it)
        result = fit(run, run.encode(train_all, targets, subset=trained), train_all, dev)
        saved = saved_run(out)
        result.update(n_train=len(trained), **{k: saved[k] for k in ("data", "word_vectors")
                                               if saved.get(k)})
        # test
        if config.test:
            result.update(_test_result(config))
        atomic_write_text(out / "result.json", json.dumps(result, indent=2) + "\n")
        return result


def read_split(config: TaskConfig, path: str, labeled: bool = True) -> list:
    """`path` read in the run's format; `labeled`: tags or labels checked and required."""
    dataset, options = FORMATS[config.format], config.reader_options(labeled)
    examples = dataset.read(path, **options)
    if labeled:
        dataset.check_labeled(path, examples, options)
        TASKS[config.task].require_targets(examples, path)
    return examples


def data_notes(config: TaskConfig, examples: list) -> dict[str, Any]:
    """Facts about a split that the run records: its format's (lines skipped) and its task
    type's."""
    return {**FORMATS[config.format].notes(examples), **TASKS[config.task].data_notes(examples)}


def read_splits(config: TaskConfig) -> tuple[list, list, list | None, list[str]]:
    """A run's training examples (without the held-out dev part), dev and test examples
    (None without --test), checked; and the labels of the whole training file."""
    kind = TASKS[config.task]
    train_all = read_split(config, config.train)
    labels = kind.labels(train_all)
    kind.check_training(train_all, labels, config)
    if config.dev:
        dev = read_split(config, config.dev)
        kind.warn_unseen(dev, labels, config.dev, config)
    else:  # the same held-out part for every seed and fraction
        kept, held = held_out_split(len(train_all), config.dev_fraction,
                                    kind.held_out_groups(train_all))
        train_all, dev = [train_all[i] for i in kept], [train_all[i] for i in held]
    test = None
    if config.test:
        test = read_split(config, config.test)
        kind.warn_unseen(test, labels, config.test, config)
    return train_all, dev, test, labels


def compute_features(config: TaskConfig) -> None:
    """Fill the feature cache with every split a run of `config` reads (nothing to do without
    ELMo or with a fine-tuned biLM), so that runs in parallel processes only read it."""
    if config.elmo is None or config.fine_tune:
        return
    config = resolve_config(config)
    train_all, dev, test, _ = read_splits(config)
    bilm = load_model(config.elmo, progress=config.progress, quantize=config.quantize).bilm
    for examples in (train_all, dev, test or []):
        if examples:
            feature_store(bilm, examples, config).close()


# ---- the run directory ------------------------------------------------------------------


def _make_room(out: Path, config: TaskConfig, ours: bool, overwrite: bool) -> None:
    """Refuse `out` unless it is new, empty or this run's (`ours`: it holds a task run); with
    `overwrite`, delete another run's files (or ours among foreign files) so that the run
    starts anew."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    differing = _differing_options(out, config) if ours else []
    if ours and not differing:
        return
    if not ours and _holds_bilm(out):
        raise ElmoError(f"{out} holds a biLM: a task run never replaces a model; choose "
                        "another --out")
    if not overwrite:
        if ours:
            raise ElmoError(f"{out} holds a run with other options ({', '.join(differing)}: "
                            "see its config.json); give another --out, the same options to "
                            "resume it, or --overwrite to replace it")
        raise ElmoError(f"{out} is not empty and holds no task run: choose a new or empty "
                        "--out, or pass --overwrite to write the run into it (files of the "
                        "run's names are replaced)")
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)


def _holds_bilm(directory: Path) -> bool:
    """A biLM in our format or one official options/weights pair."""
    if is_native_dir(directory):
        return True
    try:
        find_official_pair(directory)
    except ElmoError:
        return False
    return True


def _differing_options(out: Path, config: TaskConfig) -> list[str]:
    """The options in which the task run in `out` differs from `config`, but for those that
    may change on resume (an option added since the run started counts as its default); none:
    it is this run."""
    try:
        saved = TaskConfig.from_dict(saved_run(out)["task"])
    except FileNotFoundError:  # killed before it wrote its options: it starts anew
        return []
    except (OSError, ValueError, KeyError, TypeError, ElmoError):
        return ["unreadable options"]
    return [f"--{name.replace('_', '-')}" for name in
            changed_options(asdict(saved), asdict(config), RESUMABLE_CHANGES)[1]]


def _finished_result(out: Path, config: TaskConfig) -> dict[str, Any] | None:
    """The result of the run in `out` if it has finished training (scored on `config.test`
    if that changed), else None."""
    if not (out / "result.json").is_file():
        return None
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    if result["epochs"] < config.epochs and not result["early_stopped"]:
        return None  # resumed with more epochs
    if config.test and result.get("test_file") != config.test:
        result.update(_test_result(config))
    return result


# ---- a trained run: test, evaluate, predict ------------------------------------------------


def _test_result(config: TaskConfig) -> dict[str, Any]:
    run = Run.load(config.out, progress=config.progress, cache_dir=config.cache_dir,
                   device=config.device)
    test = read_split(run.config, config.test)
    scores = run.evaluate(test)
    return {"test": scores.pop("score"), **{f"test_{k}": v for k, v in scores.items()},
            "test_file": config.test, "n_test": len(test)}


def _warn_unfinished(run_dir: Path, config: TaskConfig) -> None:
    """Warn when the run has not finished training (it has no result.json)."""
    if not (run_dir / "result.json").is_file():
        metrics = run_dir / METRICS_NAME
        done = len(metrics.read_text(encoding="utf-8").splitlines()) if metrics.exists() else 0
        warnings.warn(f"{run_dir}: training is incomplete ({done} of {config.epochs} epochs): "
                      "the best model so far is used; run the same `elmo task train` command "
                      "to finish it", stacklevel=3)


def evaluate_run(run_dir: str | Path, test: str, **overrides: Any) -> dict[str, Any]:
    """The run's metric on `test` (read in the run's format): {metric, score, n, file, run}
    and the format's notes on the file (lines skipped)."""
    config, labels = run_config(run_dir, **overrides)  # the file is read before the model
    _warn_unfinished(Path(run_dir), config)
    examples = read_split(config, test)
    TASKS[config.task].warn_unseen(examples, labels, test, config)
    run = Run.load(run_dir, **overrides)
    return {"metric": run.config.metric, **run.evaluate(examples), "n": len(examples),
            "file": str(test), "run": str(run_dir), **FORMATS[config.format].notes(examples)}


def predict_file(run_dir: str | Path, input_path: str, output_path: str, **overrides: Any) -> int:
    """Write the run's predictions for `input_path` to `output_path`: in the input's format
    with tags or labels replaced (or added where it has none); SQuAD's {question id: answer
    text} for spans. Returns the number of examples."""
    config, labels = run_config(run_dir, **overrides)
    _warn_unfinished(Path(run_dir), config)
    examples = read_split(config, input_path, labeled=False)
    FORMATS[config.format].check_unlabeled(input_path, examples, labels)
    run = Run.load(run_dir, **overrides)
    run.kind.write_predictions(output_path, examples, run.predict(examples), run.config)
    return len(examples)


def export_text(input_path: str, output_path: str, format: str, **options: Any) -> int:
    """Write the sentences of a task file, tokens joined by spaces, one per line (the text
    `elmo train` reads); returns their number."""
    sentences = flat_sentences(read_dataset(input_path, format, **options))
    atomic_write_text(output_path, "".join(" ".join(s) + "\n" for s in sentences))
    return len(sentences)
