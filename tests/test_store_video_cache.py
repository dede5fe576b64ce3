"""The content-addressed video cache: locations, verify-then-rename, resume, locks, prune."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from glasskit_eval.errors import StoreError
from glasskit_eval.store.config import VideoStoreConfig
from glasskit_eval.store.progress import TerminalProgress, format_size
from glasskit_eval.store.s3 import S3Client
from glasskit_eval.store.transport import HttpResponse, TransportError
from glasskit_eval.store.video_cache import VideoCache, default_cache_dir
from glasskit_eval.support.fsio import FileLock

ROOT = Path(__file__).resolve().parent.parent
DATA = bytes(range(256)) * 4099  # a little over 1 MiB: more than one read chunk
SHA = hashlib.sha256(DATA).hexdigest()
KEY = "clips/task one.MP4"


class _Cut(io.BytesIO):
    """A body that dies after ``limit`` bytes, like a dropped connection (or Ctrl+C)."""

    def __init__(self, data: bytes, limit: int, error: BaseException) -> None:
        super().__init__(data)
        self._limit = limit
        self._error = error

    def read(self, size: int | None = -1) -> bytes:
        if self.tell() >= self._limit:
            raise self._error
        want = self._limit - self.tell() if size is None or size < 0 else min(size, self._limit - self.tell())
        return super().read(want)

    read1 = read  # HttpResponse.read_some prefers read1


class Served:
    """Serves ``data`` the way S3 does: 200, 206 with Content-Range, or 416 past the end."""

    def __init__(self, data: bytes = DATA, *, ranges: bool = True) -> None:
        self.data = data
        self.ranges = ranges
        self.starts: list[int] = []
        self.cuts: list[tuple[int, BaseException]] = []

    def __call__(self, start: int) -> HttpResponse:
        self.starts.append(start)
        size = len(self.data)
        if start and not self.ranges:
            start = 0
        if start and start >= size:
            return HttpResponse(416, {"content-range": f"bytes */{size}"}, io.BytesIO(b""))
        body = self.data[start:]
        stream: io.BytesIO = io.BytesIO(body)
        if self.cuts:
            limit, error = self.cuts.pop(0)
            stream = _Cut(body, limit, error)
        if start:
            return HttpResponse(206, {"content-range": f"bytes {start}-{size - 1}/{size}"}, stream)
        return HttpResponse(200, {}, stream)


def test_default_locations_follow_the_spec(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert default_cache_dir({}, "linux", home) == home / ".cache" / "glasskit" / "eval" / "videos"
    assert default_cache_dir({"XDG_CACHE_HOME": "/x/cache"}, "linux", home) == \
        Path("/x/cache/glasskit/eval/videos")
    assert default_cache_dir({"XDG_CACHE_HOME": "relative"}, "linux", home) == \
        home / ".cache" / "glasskit" / "eval" / "videos"
    assert default_cache_dir({}, "darwin", home) == home / "Library" / "Caches" / "glasskit" / "eval" / "videos"
    assert default_cache_dir({"LOCALAPPDATA": "C:/Users/u/AppData/Local"}, "win32", home) == \
        Path("C:/Users/u/AppData/Local") / "GlassKit" / "Cache" / "eval" / "videos"
    assert default_cache_dir({"GLASSKIT_EVAL_CACHE_DIR": str(tmp_path / "c"), "XDG_CACHE_HOME": "/x"},
                             "linux", home) == tmp_path / "c"


def test_download_verifies_then_renames_and_reuses(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    served = Served()
    notes: list[str] = []
    path = cache.fetch(SHA, KEY, served, describe="team:clip", notify=notes.append)
    assert path == tmp_path / "sha256" / SHA[:2] / f"{SHA}.mp4"
    assert path.read_bytes() == DATA
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert notes == ["Downloading team:clip into the video cache"]
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, f".{path.name}.lock"])
    assert cache.fetch(SHA, KEY, served, describe="team:clip") == path
    assert served.starts == [0]


def test_mismatch_deletes_the_download_and_names_store_and_key(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    wrong = "0" * 64
    with pytest.raises(StoreError) as info:
        cache.fetch(wrong, KEY, Served(), describe="team:clips/task one.MP4")
    message = str(info.value)
    assert "team:clips/task one.MP4" in message and SHA in message and wrong in message
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")]


def test_connection_drop_mid_body_resumes_with_range(tmp_path: Path) -> None:
    served = Served()
    served.cuts = [(300_000, TransportError("reset", retryable=True)),
                   (200_000, TransportError("reset", retryable=True))]
    path = VideoCache(tmp_path).fetch(SHA, KEY, served, describe="x")
    assert path.read_bytes() == DATA
    assert served.starts == [0, 300_000, 500_000]


def test_interrupted_download_is_kept_and_resumed_next_time_never_used(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    served = Served()
    served.cuts = [(400_000, KeyboardInterrupt())]
    with pytest.raises(KeyboardInterrupt):
        cache.fetch(SHA, KEY, served, describe="x")
    final = cache.path_for(SHA, KEY)
    partial = final.with_name(f".{final.name}.partial")
    assert not final.exists() and partial.stat().st_size == 400_000
    assert cache.lookup(SHA, KEY) is None
    assert cache.fetch(SHA, KEY, served, describe="x").read_bytes() == DATA
    assert served.starts == [0, 400_000]
    assert not partial.exists()


def test_corrupt_partial_is_restarted_from_scratch(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    final = cache.path_for(SHA, KEY)
    final.parent.mkdir(parents=True)
    final.with_name(f".{final.name}.partial").write_bytes(b"garbage" * 1000)
    served = Served()
    assert cache.fetch(SHA, KEY, served, describe="x").read_bytes() == DATA
    assert served.starts == [7000, 0]


def test_complete_partial_gets_416_and_is_used_after_verification(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    final = cache.path_for(SHA, KEY)
    final.parent.mkdir(parents=True)
    final.with_name(f".{final.name}.partial").write_bytes(DATA)
    served = Served()
    assert cache.fetch(SHA, KEY, served, describe="x").read_bytes() == DATA
    assert served.starts == [len(DATA)]


def test_server_without_range_support_restarts_cleanly(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    final = cache.path_for(SHA, KEY)
    final.parent.mkdir(parents=True)
    final.with_name(f".{final.name}.partial").write_bytes(DATA[:1000])
    served = Served(ranges=False)
    assert cache.fetch(SHA, KEY, served, describe="x").read_bytes() == DATA


def test_tampered_cache_entry_is_rehashed_and_replaced(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    path = cache.fetch(SHA, KEY, Served(), describe="x")
    path.write_bytes(b"tampered")
    served = Served()
    assert cache.fetch(SHA, KEY, served, describe="x").read_bytes() == DATA
    assert served.starts == [0]


def test_bytes_replaced_with_the_same_size_and_mtime_are_not_used(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    path = cache.fetch(SHA, KEY, Served(), describe="x")
    before = path.stat()
    assert cache.lookup(SHA, KEY) == path  # hashed, and remembered for this exact file state
    with open(path, "r+b") as handle:  # in place: same inode, same size
        handle.write(b"\xff" * 4096)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert cache.lookup(SHA, KEY) is None
    assert not path.exists()
    served = Served()
    assert cache.fetch(SHA, KEY, served, describe="x").read_bytes() == DATA
    assert served.starts == [0]


def test_a_record_beside_the_video_is_not_trusted(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    final = cache.path_for(SHA, KEY)
    final.parent.mkdir(parents=True)
    final.write_bytes(b"\0" * len(DATA))
    stat = final.stat()
    marker = final.with_name(f".{final.name}.verified.json")
    marker.write_text(json.dumps({"sha256": SHA, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}))
    assert cache.lookup(SHA, KEY) is None
    assert cache.fetch(SHA, KEY, Served(), describe="x").read_bytes() == DATA
    assert not marker.exists()  # an old version's record is dropped once the video is fetched again


def test_file_lock_is_exclusive_and_survives_removal(tmp_path: Path) -> None:
    first, second = FileLock(tmp_path / "x.lock"), FileLock(tmp_path / "x.lock")
    assert first.acquire(blocking=False)
    assert not second.acquire(blocking=False)
    first.release(remove=True)
    assert second.acquire(blocking=False)
    second.release()


def test_prune_removes_stale_partials_but_not_running_downloads(tmp_path: Path) -> None:
    cache = VideoCache(tmp_path)
    done = cache.fetch(SHA, KEY, Served(), describe="x")
    other = hashlib.sha256(b"other").hexdigest()
    busy_final = cache.path_for(other, "o.mp4")
    busy_final.parent.mkdir(parents=True, exist_ok=True)
    busy_partial = busy_final.with_name(f".{busy_final.name}.partial")
    busy_partial.write_bytes(b"12345")
    stale = cache.path_for("ab" * 32, "s.webm")
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale_partial = stale.with_name(f".{stale.name}.partial")
    stale_partial.write_bytes(b"123")
    unrelated = tmp_path / "sha256" / "ab" / "notes.txt"
    unrelated.write_text("not ours")

    holder = FileLock(busy_final.with_name(f".{busy_final.name}.lock"))
    assert holder.acquire(blocking=False)
    try:
        result = cache.prune()
    finally:
        holder.release()
    assert (result.files, result.bytes, result.busy) == (1, 3, 1)
    assert not stale_partial.exists() and busy_partial.exists() and done.exists() and unrelated.exists()

    result = cache.prune(everything=True)
    assert not done.exists() and not busy_partial.exists() and unrelated.exists()
    assert result.files == 2 and result.busy == 0  # the video and the abandoned partial
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [unrelated]


def test_prune_of_a_missing_cache_is_a_no_op(tmp_path: Path) -> None:
    result = VideoCache(tmp_path / "none").prune(everything=True)
    assert (result.files, result.bytes) == (0, 0)
    assert not (tmp_path / "none").exists()


def test_format_size() -> None:
    assert [format_size(n) for n in (0, 1023, 5046, 3 * 1024 ** 3)] == ["0 B", "1023 B", "4.9 KiB", "3.0 GiB"]


_RACER = textwrap.dedent("""
    import hashlib, io, sys, time
    from pathlib import Path
    from glasskit_eval.store.video_cache import VideoCache
    from glasskit_eval.store.transport import HttpResponse

    root, source, log = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    data = source.read_bytes()

    class Slow(io.BytesIO):
        def read(self, size=-1):
            time.sleep(0.001)
            return super().read(min(size, 65536) if size and size > 0 else 65536)

    def opener(start):
        with open(log, "a") as handle:
            handle.write(f"{start}\\n")
        return HttpResponse(200, {}, Slow(data))

    sha = hashlib.sha256(data).hexdigest()
    print(VideoCache(root).fetch(sha, "v.mp4", opener, describe="race"))
""")


def test_two_processes_downloading_the_same_video_do_not_collide(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(3 * 1024 * 1024))
    log = tmp_path / "opens.log"
    script = tmp_path / "racer.py"
    script.write_text(_RACER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache"), str(source), str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    paths = {out.strip() for out, _ in results}
    assert len(paths) == 1
    assert Path(paths.pop()).read_bytes() == source.read_bytes()
    assert log.read_text().splitlines() == ["0"]  # one download; the other waited and reused it
    assert not list((tmp_path / "cache").rglob("*.partial"))


# --- against a real HTTP server on 127.0.0.1 that misbehaves on purpose ---------------------


class _FaultyHandler(BaseHTTPRequestHandler):
    server: _FaultyHTTPServer

    def do_GET(self) -> None:
        served = self.server.served
        header = self.headers.get("Range")
        served.ranges.append(header)
        fault = served.faults.pop(0) if served.faults else None
        start = int(header[len("bytes="):].rstrip("-")) if header else 0
        body = served.data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(served.data) - 1}/{len(served.data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            if fault == "cut":  # a clean close halfway: no reset, no error, just fewer bytes
                self.wfile.write(body[:len(body) // 2])
            elif fault == "trickle":  # one byte every 50 ms: never silent long enough to time out
                for byte in body:
                    if served.stop.wait(0.05):
                        return
                    self.wfile.write(bytes([byte]))
            elif fault == "silent":  # headers and a little, then nothing
                self.wfile.write(body[:1000])
                served.stop.wait()
            else:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on us, as it should

    def log_message(self, format: str, *args: object) -> None:
        pass


class _FaultyHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    served: FaultyServer


class FaultyServer:
    """Serves ``data`` with Range support; each GET takes the next of ``faults`` (then behaves)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.faults: list[str] = []
        self.ranges: list[str | None] = []
        self.stop = threading.Event()
        self.httpd = _FaultyHTTPServer(("127.0.0.1", 0), _FaultyHandler)
        self.httpd.served = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def opener(self, *, timeout_s: float = 10.0) -> Callable[[int], HttpResponse]:
        base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        client = S3Client(VideoStoreConfig("pub", "bucket", public_base_url=base), None, timeout_s=timeout_s)
        return lambda start: client.get(KEY, start, public=True)


@pytest.fixture
def http_server() -> Iterator[FaultyServer]:
    server = FaultyServer(DATA)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.httpd.shutdown()
        server.httpd.server_close()
        server.thread.join()


def test_body_cut_cleanly_before_content_length_is_resumed_with_range(tmp_path: Path,
                                                                      http_server: FaultyServer) -> None:
    http_server.faults = ["cut"]
    path = VideoCache(tmp_path).fetch(SHA, KEY, http_server.opener(), describe="pub:clip")
    assert path.read_bytes() == DATA
    assert http_server.ranges == [None, f"bytes={len(DATA) // 2}-"]


def test_bodies_cut_every_time_end_in_an_error_and_keep_the_bytes(tmp_path: Path,
                                                                  http_server: FaultyServer) -> None:
    http_server.faults = ["cut"] * 3
    cache = VideoCache(tmp_path, resume_attempts=3)
    with pytest.raises(StoreError) as info:
        cache.fetch(SHA, KEY, http_server.opener(), describe="pub:clip")
    half, quarter = len(DATA) // 2, (len(DATA) - len(DATA) // 2) // 2
    assert str(info.value) == (f"download of pub:clip kept failing (the connection closed after "
                               f"{half + quarter + (len(DATA) - half - quarter) // 2} of {len(DATA)} bytes); "
                               "run the command again to resume it")
    assert cache.lookup(SHA, KEY) is None
    # The next command resumes where this one stopped, and the result is verified.
    assert cache.fetch(SHA, KEY, http_server.opener(), describe="pub:clip").read_bytes() == DATA
    assert http_server.ranges[-1] == f"bytes={half + quarter + (len(DATA) - half - quarter) // 2}-"


def test_a_trickling_server_is_dropped_as_stalled(tmp_path: Path, http_server: FaultyServer) -> None:
    http_server.faults = ["trickle", "trickle"]
    cache = VideoCache(tmp_path, resume_attempts=2, stall_timeout_s=0.3, stall_bytes=1024)
    with pytest.raises(StoreError) as info:
        cache.fetch(SHA, KEY, http_server.opener(), describe="pub:clip")
    assert str(info.value) == ("download of pub:clip kept failing (stalled: less than 1.0 KiB in 0.3 s); "
                               "run the command again to resume it")
    assert len(http_server.ranges) == 2 and http_server.ranges[1] is not None  # resumed once, then gave up
    assert cache.fetch(SHA, KEY, http_server.opener(), describe="pub:clip").read_bytes() == DATA


def test_a_silent_server_times_out_and_the_download_resumes(tmp_path: Path, http_server: FaultyServer) -> None:
    http_server.faults = ["silent"]
    path = VideoCache(tmp_path).fetch(SHA, KEY, http_server.opener(timeout_s=0.5), describe="pub:clip")
    assert path.read_bytes() == DATA
    assert http_server.ranges == [None, "bytes=1000-"]


def test_progress_is_reported_up_to_the_whole_size(tmp_path: Path, http_server: FaultyServer) -> None:
    http_server.faults = ["cut"]
    screen = io.StringIO()
    ticks = iter(range(1000))
    progress = TerminalProgress(screen, "  pub:clip", interval_s=0, clock=lambda: float(next(ticks)))
    VideoCache(tmp_path).fetch(SHA, KEY, http_server.opener(), describe="pub:clip", progress=progress)
    lines = screen.getvalue().split("\r")
    assert lines[0] == "" and lines[1].startswith("  pub:clip: 0 B of 1.0 MiB (0%)")
    # The last line may be padded with spaces over a longer earlier one (how many reads the cut
    # download took, and so the rates drawn, depends on the socket).
    last = lines[-1]
    assert last.startswith("  pub:clip: 1.0 MiB of 1.0 MiB (100%), ") and last.endswith("\n")
    assert last.rstrip("\n").rstrip(" ").endswith("/s")
