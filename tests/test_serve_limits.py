"""`elmo serve`'s limits on connections, over real sockets on 127.0.0.1: a body that does not
arrive in time (408, the connection closed) and the cap on open connections (503)."""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("fastapi")  # the serve extra

from elmo.cli import main  # noqa: E402
from elmo.serve.limits import ServeLimits  # noqa: E402
from tests.helpers.serving import TIMEOUT, Client, serving, wait_for  # noqa: E402

BODY = json.dumps({"inputs": "the bank of the river"}).encode()


def _half_body(url: str) -> socket.socket:
    """A connection that sent a request's headers and half its body, and stalls."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), TIMEOUT)
    sock.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY[:len(BODY) // 2])
    return sock


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout, the
    test's failure, after TIMEOUT seconds of silence)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    sock.close()
    return received


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_half_bodies_get_408_and_are_closed_after_the_timeout_while_others_are_answered():
    with serving(limits=ServeLimits(body_timeout=2, max_connections=300)) as url:
        probe = Client(url)
        wait_for(lambda: probe.get("/health")[0] == 200, "the model to load")
        started = time.monotonic()
        stalled = [_half_body(url) for _ in range(200)]
        assert probe.post("/embed", {"inputs": "a b"})[0] == 200  # answered meanwhile
        answers = [_until_closed(sock) for sock in stalled]
        assert time.monotonic() - started >= 2
        assert {_status(answer) for answer in answers} == {408}
        body = json.loads(answers[0].split(b"\r\n\r\n", 1)[1])
        assert body["error_type"] == "Timeout" and "--body-timeout of 2 s" in body["error"]
        assert b"connection: close" in answers[0].lower()
        assert probe.post("/embed", {"inputs": "a b"})[0] == 200


def test_the_timeout_bounds_the_whole_body_not_each_read():
    with serving(limits=ServeLimits(body_timeout=1)) as url:
        probe = Client(url)
        wait_for(lambda: probe.get("/health")[0] == 200, "the model to load")
        in_time = _half_body(url)  # the rest within the timeout: answered
        in_time.sendall(BODY[len(BODY) // 2:])
        in_time.settimeout(TIMEOUT)
        assert _status(in_time.recv(65536)) == 200
        in_time.close()
        dripping = _half_body(url)  # a byte every 0.2 s: each read in time, the body not
        started = time.monotonic()
        for byte in BODY[len(BODY) // 2:-1]:
            time.sleep(0.2)
            try:
                dripping.sendall(bytes([byte]))
            except OSError:  # closed by the server
                break
        assert _status(_until_closed(dripping)) == 408
        assert time.monotonic() - started < TIMEOUT


def test_a_request_beyond_max_connections_gets_503_and_a_place_frees_when_one_closes():
    with serving(limits=ServeLimits(max_connections=3)) as url:
        probe = Client(url)
        wait_for(lambda: probe.get("/health")[0] == 200, "the model to load")
        open_ = [probe, Client(url), Client(url)]
        assert [client.get("/health")[0] for client in open_] == [200, 200, 200]
        extra = Client(url)  # a fourth connection, while three stay open (idle)
        assert extra.get("/health")[0] == 503
        open_.pop().close()
        wait_for(lambda: extra.get("/health")[0] == 200, "a place to free")
        assert probe.post("/embed", {"inputs": "a b"})[0] == 200


def test_cli_takes_both_limits_and_says_so_in_its_help(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--body-timeout N seconds a request's body may take to arrive" in help_text
    assert "--max-connections N connections open at once" in help_text
    started = []
    monkeypatch.setattr("elmo.serve.server.run", lambda server, sock: started.append(server))
    assert main(["serve", "--port", "0", "--body-timeout", "5", "--max-connections", "7"]) == 0
    config = started[0].config
    assert config.limit_concurrency == 8  # uvicorn counts the request's own connection
    assert config.app.state.service.limits.body_timeout == 5
    assert main(["serve", "--port", "0", "--body-timeout", "0"]) == 1
    assert "--body-timeout must be at least 1" in capsys.readouterr().err
