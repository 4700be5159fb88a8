"""Prometheus metrics of `elmo serve`, and the ASGI middleware that counts every request."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elmo.serve.batching import BatchStats

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
TOKEN_BUCKETS = tuple(2**i for i in range(3, 18))  # 8 .. 131072


class Metrics:
    """The service's metrics, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("elmo_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=r)
        self.request_seconds = Histogram("elmo_request_duration_seconds",
                                         "time from a request's arrival to its answer",
                                         ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("elmo_requests_in_flight",
                               "requests being embedded or waiting for the model", registry=r)
        self.queue_depth = Gauge("elmo_queue_depth", "requests waiting for the model",
                                 registry=r)
        self.queue_seconds = Histogram("elmo_queue_duration_seconds",
                                       "time a request waited for the model",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.batch_tokens = Histogram("elmo_batch_tokens",
                                      "positions (tokens + boundaries) per model call",
                                      buckets=TOKEN_BUCKETS, registry=r)
        self.batch_requests = Histogram("elmo_batch_requests", "requests per model call",
                                        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=r)
        self.inference_seconds = Histogram("elmo_inference_duration_seconds",
                                           "time of one model call", buckets=LATENCY_BUCKETS,
                                           registry=r)

    def watch_queue(self, depth: Callable[[], int]) -> None:
        """Read the queue depth when scraped."""
        self.queue_depth.set_function(depth)

    def record_batch(self, stats: BatchStats) -> None:
        self.batch_tokens.observe(stats.tokens)
        self.batch_requests.observe(stats.requests)
        self.inference_seconds.observe(stats.seconds)
        for seconds in stats.waited:
            self.queue_seconds.observe(seconds)


class MetricsMiddleware:
    """Counts each HTTP request by route and status and times it. Paths that are not routes
    are counted as `other`, so that scanners cannot grow the label set."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: Iterable[str]) -> None:
        self.app, self.metrics, self.routes = app, metrics, frozenset(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = scope["path"] if scope["path"] in self.routes else "other"
        status = 500  # unless the app answers
        start = time.perf_counter()

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.request_seconds.labels(route).observe(time.perf_counter() - start)
