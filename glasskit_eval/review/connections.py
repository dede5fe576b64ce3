"""Connection handling for the review server: a lobby that waits, a fixed pool that serves.

A thread per connection (``ThreadingHTTPServer``) lets a few hundred clients that connect and
send nothing, or half a request, hold as many threads, and a worker blocked on one of them
keeps Ctrl+C waiting. Here the accept path only accepts. One lobby thread waits, without
blocking on any client, until a connection has sent a whole request head, and closes it after
:data:`IDLE_TIMEOUT_S` otherwise; only then does one of :data:`MAX_SERVING` workers serve that one
request. A kept-alive connection goes back to the lobby between requests, so an idle browser tab
holds no worker either. Closing shuts every socket down, which wakes any worker blocked on a
slow client at once.
"""

from __future__ import annotations

import contextlib
import io
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable

#: Seconds a connection may take to send a request head, and a worker waits on any read or
#: write, before the connection is closed. Read at use, so tests can lower it.
IDLE_TIMEOUT_S = 30.0
#: Connections served at once; the others wait in the lobby.
MAX_SERVING = 64
#: Connections waiting in the lobby; past this the longest-waiting one is closed first.
MAX_WAITING = 4096
#: A request head larger than this is handed on as is (the handler refuses it).
_HEAD_LIMIT = 1 << 16
_READ = 1 << 16

#: Serves one request on a socket whose head is already read: (socket, bytes read so far)
#: -> (keep the connection, bytes read past that request).
Serve = Callable[[socket.socket, bytes], tuple[bool, bytes]]


class BufferedSocketReader(io.BufferedIOBase):
    """``rfile`` for one request: the bytes the lobby already read, then the socket.

    Whatever is read past the request (a pipelined next request) stays in :attr:`buffer`, to go
    back to the lobby with the connection.
    """

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        super().__init__()
        self._sock = sock
        self.buffer = bytearray(data)

    def readable(self) -> bool:
        return True

    def _fill(self) -> bool:
        chunk = self._sock.recv(_READ)
        self.buffer += chunk
        return bool(chunk)

    def readline(self, size: int | None = -1) -> bytes:
        limit = size if size is not None and size >= 0 else None
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0 and (limit is None or end < limit):
                return self._take(end + 1)
            if limit is not None and len(self.buffer) >= limit:
                return self._take(limit)
            if not self._fill():
                return self._take(len(self.buffer) if limit is None else min(limit, len(self.buffer)))

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            while self._fill():
                pass
            return self._take(len(self.buffer))
        while len(self.buffer) < size and self._fill():
            pass
        return self._take(min(size, len(self.buffer)))

    def read1(self, size: int = -1) -> bytes:
        if not self.buffer:
            self._fill()
        return self._take(len(self.buffer) if size < 0 else min(size, len(self.buffer)))

    def _take(self, count: int) -> bytes:
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data


class SocketWriter(io.BufferedIOBase):
    """``wfile``: every write goes straight out (bounded by the socket's timeout)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._sock.sendall(data)
        return len(data)


def _head_complete(data: bytes) -> bool:
    return b"\r\n\r\n" in data or b"\n\n" in data or len(data) >= _HEAD_LIMIT


class Connections:
    """The lobby thread, the worker pool and every socket they hold."""

    def __init__(self, serve: Serve) -> None:
        self._serve = serve
        self._lock = threading.Lock()
        self._closed = False
        self._selector = selectors.DefaultSelector()
        #: socket -> (deadline, bytes read so far); insertion order is waiting order.
        self._waiting: dict[socket.socket, tuple[float, bytearray]] = {}
        self._serving: set[socket.socket] = set()
        self._incoming: queue.SimpleQueue[tuple[socket.socket, bytes]] = queue.SimpleQueue()
        self._ready: queue.SimpleQueue[tuple[socket.socket, bytes] | None] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._threads = [threading.Thread(target=self._lobby, name="glasskit-review-lobby", daemon=True)]
        self._threads += [threading.Thread(target=self._work, name=f"glasskit-review-{n}", daemon=True)
                          for n in range(MAX_SERVING)]
        for thread in self._threads:
            thread.start()

    def add(self, sock: socket.socket, data: bytes = b"") -> None:
        """Hand a connection to the lobby; never blocks (this runs on the accept path)."""
        with self._lock:
            if self._closed:
                _close(sock)
                return
        self._incoming.put((sock, data))
        self._wake()

    def close(self) -> None:
        """Close every connection and stop the threads; returns within a fraction of a second."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            serving = list(self._serving)
        for sock in serving:
            _shutdown(sock)  # a worker blocked on this client wakes up now
        for _ in range(MAX_SERVING):
            self._ready.put(None)
        self._wake()
        # A worker inside a long request (a frame decode) is a daemon: Ctrl+C does not wait for it.
        deadline = time.monotonic() + 1.0
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _wake(self) -> None:
        # Already closed, or the wake-up pipe is full: the lobby is awake anyway.
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the lobby -----------------------------------------------------------

    def _lobby(self) -> None:
        try:
            while not self._closed:
                self._take_incoming()
                now = time.monotonic()
                wait = min((deadline for deadline, _ in self._waiting.values()), default=now + 1.0) - now
                for key, _ in self._selector.select(timeout=max(0.0, min(wait, 1.0))):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._wake_r:
                        _drain(self._wake_r)
                    else:
                        self._receive(sock)
                self._expire(time.monotonic())
        finally:
            for sock in list(self._waiting):
                self._drop(sock)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _take_incoming(self) -> None:
        while True:
            try:
                sock, data = self._incoming.get_nowait()
            except queue.Empty:
                return
            if _head_complete(data):
                self._dispatch(sock, data)
                continue
            while len(self._waiting) >= MAX_WAITING:
                self._drop(next(iter(self._waiting)))
            sock.setblocking(False)
            self._waiting[sock] = (time.monotonic() + IDLE_TIMEOUT_S, bytearray(data))
            self._selector.register(sock, selectors.EVENT_READ)

    def _receive(self, sock: socket.socket) -> None:
        _, data = self._waiting[sock]
        try:
            chunk = sock.recv(_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(sock)
            return
        data += chunk
        if _head_complete(bytes(data)):
            self._selector.unregister(sock)
            del self._waiting[sock]
            self._dispatch(sock, bytes(data))

    def _expire(self, now: float) -> None:
        for sock in [s for s, (deadline, _) in self._waiting.items() if deadline <= now]:
            self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        self._selector.unregister(sock)
        del self._waiting[sock]
        _close(sock)

    def _dispatch(self, sock: socket.socket, data: bytes) -> None:
        sock.setblocking(True)
        sock.settimeout(IDLE_TIMEOUT_S)
        self._ready.put((sock, data))

    # -- the workers ---------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._ready.get()
            if item is None:
                return
            sock, data = item
            with self._lock:
                if self._closed:
                    _close(sock)
                    continue
                self._serving.add(sock)
            keep, rest = False, b""
            try:
                keep, rest = self._serve(sock, data)
            except Exception:
                keep = False  # the handler already answered or logged what it could
            finally:
                with self._lock:
                    self._serving.discard(sock)
                    closed = self._closed
            if keep and not closed:
                self.add(sock, rest)
            else:
                _close(sock)


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(_READ):
            pass
    except OSError:
        pass  # nothing left to read


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the client is already gone
        sock.shutdown(socket.SHUT_RDWR)


def _close(sock: socket.socket) -> None:
    _shutdown(sock)
    sock.close()
