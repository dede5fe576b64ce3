"""The HTTP adapter's transport: kept-alive ``http.client`` connections, one bounded POST at a time.

:func:`post_json` runs on a worker thread. Every answer is bounded: ``timeout_s`` is a deadline for the
whole exchange, a body over the limit is read no further. Failures say whether the request may have
been acted on (``maybe_processed``): one that never left (the connection could not be made, or
sending failed) can be made again even for a stream adapter, which must not get a frame twice.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import AdapterError
from ..support.outside import inline

BODY_EXCERPT: Final = 300
#: The default bound of a response body (``max_response_mb``), the same as an exec adapter's stdout.
DEFAULT_MAX_RESPONSE_MB: Final = 64
_READ_CHUNK: Final = 1 << 16


class Pool:
    """Idle keep-alive connections to one origin, shared by the worker threads."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port
        self.timeout_s = timeout_s
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.opened = 0

    def take(self, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        """A connection and whether it was kept alive from an earlier request."""
        with self._lock:
            if self._idle and not fresh:
                return self._idle.pop(), True
            self.opened += 1
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.timeout_s), False

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


@dataclass(frozen=True)
class Answer:
    status: int
    #: The body parsed as JSON, else its text (``json`` says which).
    body: Any
    json: bool
    content_type: str
    retry_after: str | None


class _Deadline:
    """Ends a request at ``timeout_s`` from its start, however slowly the server drips bytes.

    A socket timeout bounds each read only; at the deadline the socket is shut down, which
    wakes a blocked read at once.
    """

    def __init__(self, timeout_s: float) -> None:
        self.expired = False
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conn = conn
        if self.expired:
            self._expire()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _read_body(response: http.client.HTTPResponse, limit: int, url: str) -> bytes:
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise _too_large(url, limit)
    data = bytearray()
    while True:
        chunk = response.read1(_READ_CHUNK)
        if not chunk:
            # read1 leaves a fully read response open, which would end its keep-alive connection.
            data += response.read()
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise _too_large(url, limit)


def _too_large(url: str, limit: int) -> AdapterError:
    return AdapterError(f"HTTP adapter: {safe_url(url)} answered more than {limit / 1048576:g} MiB; "
                        "raise max_response_mb in the adapter config if that is expected")


def post_json(pool: Pool, url: str, body: bytes, headers: Mapping[str, str], *,
              limit: int = DEFAULT_MAX_RESPONSE_MB << 20) -> Answer:
    """POST ``body`` within the pool's timeout for the whole exchange. Blocking: runs on a thread."""
    parts = urllib.parse.urlsplit(url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    send = {"Content-Type": "application/json", "Accept": "application/json", **headers}
    deadline = _Deadline(pool.timeout_s)
    try:
        # A kept-alive connection the server has since closed fails on first use: one fresh retry.
        for fresh in (False, True):
            conn, reused = pool.take(fresh)
            response: http.client.HTTPResponse | None = None
            sent = False
            try:
                if conn.sock is None:
                    conn.connect()
                deadline.watch(conn)
                conn.request("POST", path, body=body, headers=send)
                sent = True
                response = conn.getresponse()
                data = _read_body(response, limit, url)
            except AdapterError:
                _close(conn, response)
                raise
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                _close(conn, response)
                if reused and not deadline.expired:
                    continue
                raise _connection_error(url, TimeoutError() if deadline.expired else exc, sent) from None
            except (OSError, http.client.HTTPException) as exc:
                _close(conn, response)
                raise _connection_error(url, TimeoutError() if deadline.expired else exc, sent) from None
            if deadline.expired:
                _close(conn, response)
                raise _connection_error(url, TimeoutError(), True)
            if response.will_close:
                conn.close()
            else:
                pool.give_back(conn)
            return _answer(response, data)
    finally:
        deadline.cancel()
    raise AssertionError("unreachable")


def _close(conn: http.client.HTTPConnection, response: http.client.HTTPResponse | None) -> None:
    # A response the connection has let go of (it said it would close) holds the socket itself.
    if response is not None:
        response.close()
    conn.close()


def _answer(response: http.client.HTTPResponse, data: bytes) -> Answer:
    text = data.decode("utf-8", errors="replace")
    content_type = (response.getheader("Content-Type") or "").split(";")[0].strip().lower()
    retry_after = response.getheader("Retry-After")
    try:
        return Answer(response.status, json.loads(text) if text.strip() else None, True, content_type,
                      retry_after)
    except ValueError:
        return Answer(response.status, text, False, content_type, retry_after)


def not_json_error(url: str, answer: Answer) -> AdapterError:
    text = answer.body if isinstance(answer.body, str) else ""
    excerpt = inline(text[:BODY_EXCERPT]) if text.strip() else "an empty body"
    error = AdapterError(f"HTTP adapter: {safe_url(url)} answered {answer.status} with a body that is not "
                         f"JSON: {excerpt}")
    # An empty body or a page that does not claim to be JSON (a proxy's or gateway's) is the
    # path failing on the way, worth retrying; invalid JSON declared as JSON is the server's bug.
    error.transient = not text.strip() or "json" not in answer.content_type
    error.maybe_processed = True
    return error


def _connection_error(url: str, exc: BaseException, sent: bool) -> AdapterError:
    what = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__
    error = AdapterError(f"HTTP adapter request to {safe_url(url)} failed: {what}")
    error.transient = True
    error.maybe_processed = sent
    return error


def safe_url(url: str) -> str:
    """The URL without credentials or query (which may carry a key)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
