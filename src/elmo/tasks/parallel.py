"""Many task runs at once: one process per run, `jobs` at a time, for studies and tables.

Small task models do not use many cores well (one thread runs a 2,000-sentence tagger about as
fast as two), so on a machine with N cores, N runs with one thread each finish about N times
sooner than one run after another. The feature caches the runs read are computed first, in this
process, one at a time: two processes must not write the same cache entry.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import torch

from elmo.errors import ElmoError
from elmo.tasks.config import TaskConfig
from elmo.tasks.recipe import compute_features, train_task

TrainFunction = Callable[[TaskConfig], dict[str, Any]]


def _timed(train: TrainFunction, config: TaskConfig, threads: int | None) -> dict[str, Any]:
    """`train(config)` with `threads` torch threads; its result with `wall_seconds` added."""
    if threads is not None:
        torch.set_num_threads(threads)
    start = time.perf_counter()
    result = train(config)
    return {**result, "wall_seconds": time.perf_counter() - start}


def _end_with(parent: int) -> None:
    """Worker initializer: the worker ends when `parent` does (killed, its runs would go on
    training into folders a rerun then finds busy); a run resumes from its last epoch."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _features_key(config: TaskConfig) -> str:
    """What decides the feature caches a run reads (runs that differ only in seed, mix,
    placement or training fraction share them)."""
    return json.dumps([config.elmo, config.fine_tune, config.train, config.dev, config.test,
                       config.dev_fraction, config.format, config.reader_options(),
                       config.cache_dir])


def train_tasks(
    configs: Sequence[TaskConfig],
    jobs: int = 1,
    threads: int | None = None,
    train: TrainFunction = train_task,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Train every config and yield (its index, its result with `wall_seconds`) as runs finish.

    `jobs` 1 trains them here, in order. More: first every feature cache the runs need, here;
    then `jobs` worker processes (spawned, each with `threads` torch threads; default: this
    process's threads shared out, and ending when this process ends) train them, and results
    come in the order runs finish.
    `train` must then be a module-level function (it is sent to the workers).
    """
    if jobs < 1:
        raise ElmoError(f"jobs must be at least 1; got {jobs}")
    if jobs == 1:
        before = torch.get_num_threads()
        try:
            for i, config in enumerate(configs):
                yield i, _timed(train, config, threads)
        finally:
            torch.set_num_threads(before)
        return
    threads = threads or max(1, torch.get_num_threads() // jobs)
    done: set[str] = set()
    for config in configs:
        if (key := _features_key(config)) not in done:
            compute_features(config)
            done.add(key)
    context = multiprocessing.get_context("spawn")  # forking after OpenMP ran can hang
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_end_with,
                             initargs=(os.getpid(),)) as pool:
        futures = {pool.submit(_timed, train, config, threads): i
                   for i, config in enumerate(configs)}
        for future in as_completed(futures):
            yield futures[future], future.result()
