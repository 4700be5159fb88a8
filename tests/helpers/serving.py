"""Serving helpers: the app of `elmo serve` on a free local port, in a thread, with an
Embedder whose calls a test can hold; a keep-alive client; waiting for a condition."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from elmo.embed import Embedder
from elmo.serve.app import create_app
from elmo.serve.server import address, bind, make_server
from tests.conftest import random_bilm

TIMEOUT = 30  # seconds any one wait may take before the test fails


class GatedEmbedder(Embedder):
    """Records what each model call embeds; `gate.clear()` holds the calls until set."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[list[list[str]]] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.fail_next = False

    def embed_sentences(self, sentences):
        sentences = list(sentences)
        self.calls.append(sentences)
        self.entered.set()
        assert self.gate.wait(TIMEOUT)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("secret internal detail /tmp/x.py")
        return super().embed_sentences(sentences)


def reference(sentences: list[list[str]]) -> list[np.ndarray]:
    """What the Embedder gives for these sentences on their own."""
    return Embedder(random_bilm(), max_tokens=100_000).embed_sentences(sentences)


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)

    def request(self, method: str, path: str, body: object = None, raw: bytes | None = None,
                headers: dict | None = None) -> tuple[int, dict, bytes]:
        headers = {"Content-Type": "application/json", **(headers or {})}
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        self.conn.request(method, path, data, headers)
        response = self.conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()

    def post(self, path: str, body: object, **kwargs) -> tuple[int, object]:
        status, _, data = self.request("POST", path, body, **kwargs)
        return status, json.loads(data)

    def get(self, path: str) -> tuple[int, bytes]:
        status, _, data = self.request("GET", path)
        return status, data

    def close(self) -> None:
        self.conn.close()


def wait_for(condition, what: str) -> None:
    """Poll `condition` until true; fail after TIMEOUT seconds, naming `what` was awaited."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@contextmanager
def serving(embedder: Embedder | None = None, load=None, **app_options) -> Iterator[str]:
    """The app on a free port of 127.0.0.1, in a thread; stopped (gracefully) on exit."""
    embedder = embedder or GatedEmbedder(random_bilm())
    app = create_app(load or (lambda: embedder), **app_options)
    sock = bind("127.0.0.1", 0)
    server = make_server(app, app_options.get("limits"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, "the server to start")
        yield address(sock)
    finally:
        if hasattr(embedder, "gate"):
            embedder.gate.set()
        server.should_exit = True
        thread.join(TIMEOUT)
        assert not thread.is_alive()
