"""The batching queue: concurrent requests' sentences, embedded together by one Embedder.

Requests wait in a queue. While the model is busy more arrive; when it is free, the worker
takes the waiting requests, oldest first, up to a budget of tokens, and hands all their
sentences to `Embedder.embed_sentences`, which regroups them by length into batches (as
`elmo embed` does). The Embedder is stateless, so a sentence's vectors do not depend on what
it was batched with (beyond float rounding). A request whose client went away leaves the
queue before it is computed. An input that does not fit in the device's memory even alone
fails its own request (DeviceMemoryError); the others taken with it are computed again.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from elmo.embedding import Embedder
from elmo.memory import DeviceMemoryError


def sentence_tokens(sentences: Sequence[Sequence[str]]) -> int:
    """Positions the biLM runs over: each sentence's tokens and its two boundaries."""
    return sum(len(s) + 2 for s in sentences)


@dataclass(eq=False)
class _Job:
    sentences: list[list[str]]
    future: asyncio.Future
    tokens: int = field(init=False)
    queued_at: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.tokens = sentence_tokens(self.sentences)


@dataclass
class BatchStats:
    """What the worker reports of each model call (for the metrics)."""

    requests: int
    tokens: int  # positions, boundaries included
    seconds: float  # the model call
    waited: list[float]  # each request's time in the queue


class BatchQueue:
    """Queue of requests in front of one Embedder, computed by one worker thread.

    `max_batch_tokens` bounds the positions (boundaries included) taken into one model call;
    a single request larger than that is taken alone (the Embedder still splits it into
    batches of its own `max_tokens`). `on_batch` is called after each model call.
    """

    def __init__(self, embedder: Embedder, max_batch_tokens: int,
                 on_batch: Callable[[BatchStats], None] | None = None) -> None:
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        self.embedder, self.max_batch_tokens, self.on_batch = embedder, max_batch_tokens, on_batch
        self._jobs: deque[_Job] = deque()
        self._waiting = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="elmo-embed")
        self._worker: asyncio.Task | None = None

    @property
    def depth(self) -> int:
        """Requests waiting (not yet taken into a model call)."""
        return len(self._jobs)

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop the worker; requests still waiting fail with CancelledError."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        for job in self._jobs:
            job.future.cancel()
        self._jobs.clear()
        self._executor.shutdown(wait=True)

    async def embed(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """The layers (L+1, n_i, 2P) of each sentence, computed with whatever else waits.
        Cancelling the caller (its client went away) takes the request out of the queue."""
        job = _Job(sentences, asyncio.get_running_loop().create_future())
        self._jobs.append(job)
        self._waiting.set()
        try:
            return await job.future
        except asyncio.CancelledError:
            if job in self._jobs:
                self._jobs.remove(job)
            raise

    def _take(self) -> list[_Job]:
        """The oldest waiting requests, up to the token budget (at least one)."""
        jobs, tokens = [], 0
        while self._jobs and (not jobs or tokens + self._jobs[0].tokens <= self.max_batch_tokens):
            job = self._jobs.popleft()
            jobs.append(job)
            tokens += job.tokens
        if not self._jobs:
            self._waiting.clear()
        return jobs

    def _fail_the_request_of(self, err: DeviceMemoryError, jobs: list[_Job]) -> None:
        """The request holding the input that does not fit fails with `err`, naming the
        input; the other requests wait again at the head of the queue."""
        starts = list(itertools.accumulate((len(job.sentences) for job in jobs), initial=0))
        culprit = bisect.bisect_right(starts, err.index) - 1
        if not jobs[culprit].future.done():
            jobs[culprit].future.set_exception(err.changed(
                subject=f"input {err.index - starts[culprit]} of the request",
                advice="send it in shorter pieces"))
        self._jobs.extendleft(reversed([job for job in jobs[:culprit] + jobs[culprit + 1:]
                                        if not job.future.done()]))
        if self._jobs:
            self._waiting.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._waiting.wait()
            jobs = self._take()
            if not jobs:
                continue
            sentences = [s for job in jobs for s in job.sentences]
            start = time.perf_counter()
            try:
                layers = await loop.run_in_executor(
                    self._executor, self.embedder.embed_sentences, sentences)
            except DeviceMemoryError as err:
                self._fail_the_request_of(err, jobs)
                continue
            except Exception as err:  # each waiting request answers with it
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(err)
                continue
            if self.on_batch is not None:
                self.on_batch(BatchStats(len(jobs), sentence_tokens(sentences),
                                         time.perf_counter() - start,
                                         [start - job.queued_at for job in jobs]))
            offset = 0
            for job in jobs:
                if not job.future.done():  # not cancelled meanwhile
                    job.future.set_result(layers[offset: offset + len(job.sentences)])
                offset += len(job.sentences)
