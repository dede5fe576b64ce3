"""The review server under a thousand idle and half-open connections: it answers, times them
out, serves a bounded number at once and stops at once, whatever the clients do."""

from __future__ import annotations

import contextlib
import http.client
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from glasskit_eval.commands.review import ReviewOptions, start_review
from glasskit_eval.review import connections
from glasskit_eval.review.server import ReviewServer, serve_in_thread

REPO = Path(__file__).resolve().parent.parent
CASE = "video: clip.mp4\ntargets:\n  door:\n    samples:\n      - at: 0.5\n        expect: closed\n"
HELD = 1000
#: Descriptors the in-process tests need: both ends of every held connection, and some to spare.
FDS_NEEDED = 2 * HELD + 256


@pytest.fixture(autouse=True)
def enough_descriptors() -> Iterator[None]:
    """Raise the soft descriptor limit for these tests (a review subprocess inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < FDS_NEEDED:
        if hard != resource.RLIM_INFINITY and hard < FDS_NEEDED:
            pytest.skip(f"holding {HELD} connections needs {FDS_NEEDED} descriptors; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (FDS_NEEDED, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def make_eval(tmp_path: Path) -> Path:
    root = tmp_path / "eval"
    (root / "cases").mkdir(parents=True)
    shutil.copy(REPO / "fixtures" / "videos" / "cfr_h264.mp4", root / "cases" / "clip.mp4")
    (root / "cases" / "clip.yaml").write_text(CASE, encoding="utf-8")
    return root


@contextlib.contextmanager
def held_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """Connections that send nothing, half a request head, or a head whose body never comes."""
    socks = []
    try:
        for n in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            socks.append(sock)
            if n % 3 == 1:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
            elif n % 3 == 2:
                sock.sendall(b"PUT /api/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n")
        yield socks
    finally:
        for sock in socks:
            sock.close()


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while sock.recv(1 << 16):
            pass  # an error response before the close is fine
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def log_in(port: int, token: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", f"/?token={token}")
        return conn.getresponse().status
    finally:
        conn.close()


def still_open(sock: socket.socket) -> bool:
    """Whether the server has left ``sock`` alone so far: nothing sent (a timeout answer), no end of stream."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


#: Long enough that a login made to wait for idle connections to time out would see them closed
#: first, however loaded the machine; short enough to keep the test brief.
IDLE_S = 8.0


def test_held_connections_leave_others_answered_and_are_closed_after_the_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connections, "IDLE_TIMEOUT_S", IDLE_S)
    threads_before = threading.active_count()
    server: ReviewServer = start_review(ReviewOptions(eval_dir=make_eval(tmp_path)))
    thread = serve_in_thread(server)
    try:
        started = threading.active_count()
        assert started - threads_before <= connections.MAX_SERVING + 2
        with held_connections(server.port, HELD) as socks:
            assert log_in(server.port, server.state.secrets.launch_token) == 200
            # Answered while every silent or half-sent connection is still open: the login did
            # not wait for idle ones to time out (causal, not timed). (A head without its body is
            # answered at once: it was never logged in.)
            assert [n for n, sock in enumerate(socks) if n % 3 != 2 and not still_open(sock)] == []
            # A fixed pool: a thousand connections add no thread.
            assert threading.active_count() == started
            # Then the server closes them (the test's own wait is far beyond the idle timeout).
            assert all(closed_by_server(sock, within=60.0) for sock in socks)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert threading.active_count() <= threads_before + 1


def test_ctrl_c_stops_review_within_a_second_while_connections_are_held(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", "review", "--eval-dir", str(make_eval(tmp_path)),
                             "--no-open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
        assert match, line
        port = int(match.group(1))
        with held_connections(port, HELD) as socks:
            assert log_in(port, match.group(2)) == 200
            proc.send_signal(signal.SIGINT)
            # Waiting for the held connections would take the idle timeout (30 s) at least.
            _, err = proc.communicate(timeout=connections.IDLE_TIMEOUT_S * 2 / 3)
            assert proc.returncode == 0 and "Traceback" not in err, err
            assert all(closed_by_server(sock, within=10.0) for sock in socks)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_closing_the_server_closes_every_held_connection_at_once(tmp_path: Path) -> None:
    server: ReviewServer = start_review(ReviewOptions(eval_dir=make_eval(tmp_path)))
    thread = serve_in_thread(server)
    try:
        with held_connections(server.port, HELD) as socks:
            # Heads whose bodies never come keep workers busy: stopping must not wait for them.
            assert log_in(server.port, server.state.secrets.launch_token) == 200
            stopping = threading.Thread(target=lambda: (server.shutdown(), server.server_close()))
            stopping.start()
            # Waiting for the heads would take the idle timeout (30 s) at least.
            stopping.join(timeout=connections.IDLE_TIMEOUT_S * 2 / 3)
            assert not stopping.is_alive()
            assert all(closed_by_server(sock, within=10.0) for sock in socks)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
