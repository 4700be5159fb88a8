"""Running the app: the socket bound first (so that the address is known and a busy port
fails at once), then uvicorn; SIGTERM or Ctrl-C stop it gracefully."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from elmo.errors import ElmoError
from elmo.serve.limits import ServeLimits


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free port). Made with the protocol
    that getaddrinfo names, as asyncio does: its connections then get TCP_NODELAY (asyncio
    sets it only on sockets whose protocol is TCP), without which a keep-alive client can
    wait 40 ms for each answer (Nagle's algorithm against delayed ACKs)."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as err:
        raise ElmoError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(2048)
        return sock
    except OSError as err:
        sock.close()
        raise ElmoError(f"cannot listen on {host}:{port}: {err.strerror or err}; choose "
                        "another --port or --host") from None


def address(sock: socket.socket) -> str:
    """The URL a bound socket answers on."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_server(app: FastAPI, limits: ServeLimits | None = None, access_log: bool = False
                ) -> uvicorn.Server:
    """A uvicorn server for `app` (run it with `run(server, sock)`); its own log lines go to
    stderr at level INFO, one per request with `access_log`. Idle keep-alive connections
    stay open 75 s, longer than load balancers keep theirs (nginx: 60 s), so that the
    balancer, not the replica, closes them. At most `limits.max_connections` connections
    are served at once: uvicorn answers 503 to a request when its connection, counted with
    the others, reaches `limit_concurrency`, hence one more."""
    limits = limits or ServeLimits()
    return uvicorn.Server(uvicorn.Config(app, access_log=access_log, log_level="info",
                                         lifespan="on", timeout_keep_alive=75,
                                         limit_concurrency=limits.max_connections + 1))


def run(server: uvicorn.Server, sock: socket.socket) -> None:
    """Serve on `sock` until SIGTERM or Ctrl-C: stop accepting connections, answer the
    requests in flight, then return (a second Ctrl-C stops at once)."""
    with _signals_end_the_server():
        server.run(sockets=[sock])


@contextmanager
def _signals_end_the_server() -> Iterator[None]:
    """uvicorn catches SIGTERM and SIGINT while it runs, shuts down, then raises the signal
    again for the handler that was there before: here one that ignores it, so the process
    returns normally (exit status 0) instead of dying of the signal."""
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, lambda *_: None) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
