"""A small HTTP file server on 127.0.0.1 that can misbehave as real servers do: ignore a
range, cut a body short, announce more than it sends, stall."""

from __future__ import annotations

import http.server
import threading


class FileServer:
    """A tiny configurable HTTP server: serves ``files``, supports ``Range: bytes=N-``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.ignore_range = False
        self.cut_after: int | None = None  # close the connection after N bytes, once
        self.announce_extra = 0  # announce this many bytes more than are sent
        self.stall = False  # send a few bytes, then wait until the test ends
        self.release = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - stdlib naming
                rng = self.headers.get("Range")
                server.requests.append((self.path, rng))
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                if rng and not server.ignore_range:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body) + server.announce_extra))
                self.end_headers()
                if server.stall:
                    self.wfile.write(body[:1000])
                    self.wfile.flush()
                    server.release.wait(5)
                    return
                if server.cut_after is not None:
                    n, server.cut_after = server.cut_after, None
                    self.wfile.write(body[:n])
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return self.base + path

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
