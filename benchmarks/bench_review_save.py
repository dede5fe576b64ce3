"""One event save on the review page's server at 100,000 events: response bytes and round trip.

A real review server (``start_review``, in a thread) serves an eval whose case has one stream
target of 100,000 events on the 2 s fixture clip; a client logs in as a browser does and sends
the page's one-event write (``PATCH .../events``), a ``set`` of the middle event, alternating
between two values so every save writes, then adds and deletes next to it. Printed, per kind:
the median round trip (request sent to the answer parsed, as the page would), the median CPU
time of this process over it (server and client share it; steadier than the round trip on a
busy machine) and the answer's size.
``--profile`` instead runs the same saves in this process under cProfile (the server's
``handle``, so the response's JSON is counted too) and prints the top of the cumulative table.
``--browser`` drives the page itself in headless Chromium (``tests/chromiumkit.py``): an event
added with ``A`` and deleted with ``Delete``, in the middle of the list and after its end, timed
from the keypress to the page saying it saved (the page's own work on the answer included).

    python3 benchmarks/bench_review_save.py [--events 100000] [--rounds 9] [--profile | --browser]
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import json
import pstats
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def case_text(count: int) -> str:
    lines = ["# a long stream", "video: clip.mp4", "targets:", "  door:", "    samples:", "      - at: 0.5",
             "        expect: closed", "  pan:", "    stream: {window: [0, 0.000001]}", "    events:"]
    for i in range(count):
        lines.append(f"      - at: {i * 1.9 / count:.7f}")
        lines.append("        expect: x")
    lines += ["    quiet: [[1.95, 1.96]]"]
    return "\n".join(lines) + "\n"


def make_eval(folder: Path, count: int) -> Path:
    cases = folder / "eval" / "cases"
    cases.mkdir(parents=True)
    shutil.copy(ROOT / "fixtures" / "videos" / "cfr_h264.mp4", cases / "clip.mp4")
    (cases / "clip.yaml").write_text(case_text(count))
    return folder / "eval"


class Client:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        status, headers, page = self.request("GET", f"/?token={token}")
        assert status == 200
        self.cookie = headers["set-cookie"].split(";")[0]
        match = re.search(rb'content="0;url=/#write=([\w.-]+)"', page)
        assert match
        self.csrf = match.group(1).decode()

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            headers = {"Host": f"127.0.0.1:{self.port}"}
            if getattr(self, "cookie", None):
                headers["Cookie"] = self.cookie
            if body is not None:
                headers.update({"Content-Type": "application/json", "X-CSRF-Token": self.csrf,
                                "Origin": f"http://127.0.0.1:{self.port}"})
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()


def edits(count: int, rounds: int) -> list[tuple[str, dict[str, Any]]]:
    """(what, body without revision): sets of the middle event, then adds and deletes after it."""
    middle = count // 2
    at = middle * 1.9 / count
    out: list[tuple[str, dict[str, Any]]] = []
    for r in range(rounds):
        out.append(("set", {"op": "set", "index": middle, "event": {"at": at, "expect": "y" if r % 2 else "z"}}))
    for _r in range(rounds):
        out.append(("add", {"op": "add", "index": middle + 1, "event": {"at": at + 5e-6, "expect": "w"}}))
        out.append(("delete", {"op": "delete", "index": middle + 1}))
    return out


def over_http(root: Path, count: int, rounds: int) -> None:
    from glasskit_eval.commands.review import ReviewOptions, start_review
    from glasskit_eval.review.server import serve_in_thread

    server = start_review(ReviewOptions(eval_dir=root))
    thread = serve_in_thread(server)
    try:
        client = Client(server.port, server.state.secrets.launch_token)
        started = time.perf_counter()
        status, _, data = client.request("GET", "/api/cases/clip")
        print(f"case detail: {len(data):,} bytes in {time.perf_counter() - started:.2f} s (status {status})")
        revision = json.loads(data)["revision"]
        figures: dict[str, list[tuple[float, float, int]]] = {}
        for what, body in edits(count, rounds):
            started, cpu = time.perf_counter(), time.process_time()
            status, _, data = client.request("PATCH", "/api/cases/clip/targets/pan/events",
                                             json.dumps({"revision": revision, **body}).encode())
            assert status == 200, data[:500]
            revision = json.loads(data)["revision"]
            figures.setdefault(what, []).append((time.perf_counter() - started, time.process_time() - cpu, len(data)))
        for what, rows in figures.items():
            times = [t for t, _c, _n in rows]
            cpus = [c for _t, c, _n in rows]
            sizes = sorted({n for _t, _c, n in rows})
            print(f"{what:>6}: round trip median {statistics.median(times):.3f} s "
                  f"(min {min(times):.3f}, max {max(times):.3f}), CPU median {statistics.median(cpus):.3f} s, "
                  f"over {len(rows)}; response {sizes} bytes")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def in_browser(root: Path, count: int, rounds: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from chromiumkit import VIEWPORT, launched

    from glasskit_eval.commands.review import ReviewOptions, start_review
    from glasskit_eval.review.server import serve_in_thread

    server = start_review(ReviewOptions(eval_dir=root))
    thread = serve_in_thread(server)
    try:
        with launched() as chromium:
            context = chromium.new_context(viewport=VIEWPORT)
            tab = context.new_page()
            sizes: list[int] = []
            tab.on("response", lambda r: sizes.append(len(r.body())) if r.request.method == "PATCH" else None)
            started = time.perf_counter()
            tab.goto(server.login_url)
            tab.wait_for_selector(".tl-row[data-target='pan'] .tl-event", timeout=600_000)
            print(f"page load: {time.perf_counter() - started:.1f} s")
            tab.click(".tl-name[data-target='pan']")
            times: list[float] = []
            # Frame times clear of every event's window: the middle of the list, and after its end.
            for n, t in enumerate([1.0, 1.0, 1.9, 1.9] * rounds, start=1):
                tab.fill("#time-input", str(t))
                tab.press("#time-input", "Enter")
                tab.wait_for_selector("#frame-label:not(.stale)")
                started = time.perf_counter()
                tab.keyboard.press("a" if n % 2 else "Delete")
                tab.wait_for_selector(f"#save-status[data-saves='{n}']:not(.saving)", timeout=600_000)
                times.append(time.perf_counter() - started)
            print(f"keypress to saved: median {statistics.median(times):.2f} s (min {min(times):.2f}, "
                  f"max {max(times):.2f}) over {len(times)}; answers {sorted(set(sizes))} bytes")
            context.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def profiled(root: Path, count: int, rounds: int) -> None:
    from glasskit_eval.review import api, casedata
    from glasskit_eval.review.api import Request, ReviewState

    state = ReviewState(root=root, port=0)
    session, csrf = _session(state)
    loaded = casedata.load(root, "clip")
    state.detail(loaded)
    revision = loaded.revision
    headers = {"host": "127.0.0.1:0", "cookie": session, "x-csrf-token": csrf, "origin": "http://127.0.0.1:0",
               "content-type": "application/json"}

    def send(body: dict[str, Any]) -> bytes:
        data = json.dumps({"revision": revision, **body}).encode()
        request = Request("PATCH", "/api/cases/clip/targets/pan/events", {**headers, "content-length": str(len(data))},
                          lambda n: data)
        response = api.handle(state, request)
        assert response.status == 200 and isinstance(response.body, bytes), response.body
        return response.body

    profile = cProfile.Profile()
    started = time.perf_counter()
    saves = edits(count, rounds)
    for _what, body in saves:
        profile.enable()
        out = send(body)
        profile.disable()
        revision = json.loads(out)["revision"]
    print(f"{len(saves)} saves in process: {(time.perf_counter() - started) / len(saves):.3f} s each")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


def _session(state: Any) -> tuple[str, str]:
    """A session cookie and write key for ``state``, as a browser's login gets them."""
    from glasskit_eval.review import api
    from glasskit_eval.review.api import Request

    response = api.handle(state, Request("GET", f"/?token={state.secrets.launch_token}", {"host": "127.0.0.1:0"}))
    cookie = dict(response.headers)["Set-Cookie"].split(";")[0]
    assert isinstance(response.body, bytes)
    match = re.search(rb'content="0;url=/#write=([\w.-]+)"', response.body)
    assert match
    return cookie, match.group(1).decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--profile", action="store_true")
    mode.add_argument("--browser", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = make_eval(Path(folder), options.events)
        print(f"case file: {(root / 'cases' / 'clip.yaml').stat().st_size:,} bytes, {options.events:,} events")
        run = profiled if options.profile else in_browser if options.browser else over_http
        run(root, options.events, options.rounds)


if __name__ == "__main__":
    main()
