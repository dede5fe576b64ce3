"""A fake model API: a real stdlib ``http.server`` on 127.0.0.1 in a thread.

Each path is a behaviour: ``/ok`` answers the frame's size and index, ``/flaky/N`` answers 503 to
the first N requests of each sample, ``/limited/N`` answers 429 with ``Retry-After`` N times per
sample, ``/hang`` never answers (until the server stops), ``/slow`` answers after a pause,
``/status/CODE`` answers CODE, ``/garbage`` answers text declared as JSON, ``/html`` a proxy's HTML
page, ``/huge/N`` N MiB without a Content-Length, ``/drip/N`` a valid answer led by N spaces sent
one every 50 ms, ``/echo/CODE`` answers CODE with the
request's Authorization header and path in its body (as careless servers do). Every request is recorded with its
time, headers and client port (so keep-alive can be checked).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Seen:
    path: str
    at: float
    port: int
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ModelServer:
    url: str
    seen: list[Seen] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    retry_after: str = "0.2"
    slow_s: float = 0.3
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self, prefix: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path.startswith(prefix)]


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            seen = Seen(self.path, time.monotonic(), self.client_address[1], dict(self.headers.items()), body)
            with server.lock:
                server.seen.append(seen)
                count = sum(1 for s in server.seen if s.path == self.path
                            and _index(s.body) == _index(body))
            parts = self.path.split("?")[0].strip("/").split("/")
            if parts[0] == "hang":
                server.stop.wait(30)
                return
            if parts[0] == "slow":
                time.sleep(server.slow_s)
            if parts[0] == "flaky" and count <= int(parts[1]):
                return self._send(503, {"error": "overloaded"})
            if parts[0] == "limited" and count <= int(parts[1]):
                return self._send(429, {"error": "rate limited"}, {"Retry-After": server.retry_after})
            if parts[0] == "status":
                return self._send(int(parts[1]), {"error": "nope"})
            if parts[0] == "echo":
                said = f"bad token {self.headers.get('Authorization')!r} for {self.path}"
                return self._send(int(parts[1]), {"error": said, "observation": {"width": said}})
            if parts[0] == "garbage":
                return self._send(200, None, raw=b"<html>not json</html>")
            if parts[0] == "html":
                return self._send(200, None, raw=b"<html>bad gateway</html>", content_type="text/html")
            if parts[0] == "huge":
                return self._stream_huge(int(parts[1]))
            if parts[0] == "drip":
                return self._drip(int(parts[1]))
            if parts[0] == "batch":
                samples = body["samples"]
                return self._send(200, {"observations": [_observe(s, self.headers) for s in samples],
                                        "usage": {"prompt_tokens": 10 * len(samples)}})
            self._send(200, {"observation": _observe(body["sample"], self.headers),
                             "usage": {"prompt_tokens": 120, "completion_tokens": 7, "cost_usd": 0.001}})

        def _stream_huge(self, mib: int) -> None:
            # No Content-Length: the client can only stop reading, not refuse up front.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            block = b"x" * (1 << 20)
            try:
                self.wfile.write(b'{"observation": {"width": "')
                for _ in range(mib):
                    self.wfile.write(block)
                self.wfile.write(b'"}}')
            except OSError:
                pass  # the client stopped reading

        def _drip(self, count: int) -> None:
            # A valid answer, one byte every 50 ms: each read is quick, the whole is not.
            data = b" " * count + json.dumps({"observation": {"width": 128}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                for i in range(len(data)):
                    if i < count and server.stop.wait(0.05):
                        return
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
            except OSError:
                pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                  raw: bytes | None = None, content_type: str = "application/json") -> None:
            data = raw if raw is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _index(body: dict[str, Any]) -> Any:
    sample = body.get("sample")
    return sample.get("sampleIndex") if isinstance(sample, dict) else None


def _observe(sample: dict[str, Any], headers: Any) -> dict[str, Any]:
    image = sample["image"]
    return {"width": image["width"], "height": image["height"], "frameIndex": sample["frameIndex"],
            "mime": image["mimeType"], "authorized": headers.get("Authorization") == "Bearer sk-secret-42",
            "bytes": len(image["dataBase64"])}


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server = ModelServer(url=f"http://127.0.0.1:{httpd.server_address[1]}")
    httpd.RequestHandlerClass = _handler(server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="model-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@contextmanager
def json_endpoint(answer: Callable[[Any], Any]) -> Iterator[int]:
    """A plain local endpoint: every POST's JSON body gets ``answer(body)`` back as JSON. Yields its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps(answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
