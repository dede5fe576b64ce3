"""The review server over real HTTP: access rules, reads, video ranges, frames and saves.

The Request -> Response core is tested without a socket in test_review_api.py.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from framecode import read_frame_index
from PIL import Image

from glasskit_eval.cli import main
from glasskit_eval.commands.review import ReviewOptions, start_review
from glasskit_eval.review.media import frame_table, parse_range
from glasskit_eval.review.server import ReviewServer, serve_in_thread
from glasskit_eval.video.frames import decode_at

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo" / "eval"
VIDEOS = REPO / "fixtures" / "videos"

FRAMES_CASE = """\
# A hand-written case: this comment must survive every save.
video: clip.mp4
targets:
  # the target comment stays too
  door:
    samples:
      - at: 0.5   # trailing comment
        expect: closed
      - range: [1.0, 1.5]
        expect: open
"""


class Client:
    def __init__(self, server: ReviewServer) -> None:
        self.port = server.port
        self.secrets = server.state.secrets
        self.origin = f"http://127.0.0.1:{self.port}"
        self.cookie: str | None = None
        self.csrf: str | None = None

    def request(self, method: str, path: str, body: bytes | None = None, *, host: str | None = None,
                headers: dict[str, str] | None = None, cookie: bool = True) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host or f"127.0.0.1:{self.port}")
            if cookie and self.cookie:
                conn.putheader("Cookie", self.cookie)
            for name, value in (headers or {}).items():
                conn.putheader(name, value)
            if body is not None and "Content-Length" not in (headers or {}):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            if body:
                conn.send(body)
            response = conn.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            conn.close()

    @property
    def token(self) -> str:
        """The current one-time launch token (each login spends it)."""
        return self.secrets.launch_token

    def login(self) -> None:
        status, headers, page = self.request("GET", f"/?token={self.token}", cookie=False)
        assert status == 200
        self.cookie = headers["set-cookie"].split(";")[0]
        # The write key comes in the fragment the login page moves on to; the page keeps it in
        # sessionStorage.
        match = re.search(rb'content="0;url=/#write=([\w.-]+)"', page)
        assert match
        self.csrf = match.group(1).decode()

    def get_json(self, path: str) -> Any:
        status, _, data = self.request("GET", path)
        assert status == 200, data
        return json.loads(data)

    def put_json(self, path: str, value: Any, *, csrf: str | None = None,
                 content_type: str = "application/json") -> tuple[int, Any]:
        headers = {"Content-Type": content_type, "X-CSRF-Token": csrf if csrf is not None else self.csrf or "",
                   "Origin": f"http://127.0.0.1:{self.port}"}
        status, _, data = self.request("PUT", path, json.dumps(value).encode(), headers=headers)
        return status, json.loads(data) if data else None


def make_eval(tmp_path: Path, case_text: str = FRAMES_CASE, video: str = "cfr_h264.mp4") -> Path:
    root = tmp_path / "eval"
    (root / "cases").mkdir(parents=True)
    shutil.copy(VIDEOS / video, root / "cases" / "clip.mp4")
    (root / "cases" / "clip.yaml").write_text(case_text, encoding="utf-8")
    return root


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Client, Path]]:
    root = make_eval(tmp_path)
    server = start_review(ReviewOptions(eval_dir=root))
    thread = serve_in_thread(server)
    client = Client(server)
    client.login()
    try:
        yield client, root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def error_of(data: bytes) -> dict[str, Any]:
    body = json.loads(data)
    assert set(body) >= {"code", "message"}
    assert "Traceback" not in body["message"]
    return body


# --- access rules ----------------------------------------------------------------------------


def test_wrong_host_is_refused_even_with_a_session(served: tuple[Client, Path]) -> None:
    client, _ = served
    for host in ("evil.example", f"evil.example:{client.port}", "127.0.0.1:1", f"127.0.0.2:{client.port}"):
        status, _, data = client.request("GET", "/api/cases", host=host)
        assert status == 421
        assert error_of(data)["code"] == "wrong_host"


def test_every_route_needs_the_session_cookie(served: tuple[Client, Path]) -> None:
    client, _ = served
    for path in ("/", "/static/app.js", "/api/session", "/api/cases", "/api/cases/clip",
                 "/api/cases/clip/video", "/api/cases/clip/frame?t=0", "/api/cases/clip/frames"):
        status, headers, data = client.request("GET", path, cookie=False)
        assert status == 401, path
        if path == "/":
            # The page itself says how to log in, for the person who opened the plain URL.
            assert headers["content-type"].startswith("text/html") and b"Log in to this review server" in data
            continue
        assert error_of(data)["code"] == "no_session"
        assert headers["content-type"].startswith("application/json")
    status, _, _ = client.request("GET", "/api/cases", headers={"Cookie": "glasskit_review_session=guess"},
                                  cookie=False)
    assert status == 401


def test_login_sets_a_strict_httponly_cookie_and_spends_the_token(served: tuple[Client, Path]) -> None:
    client, root = served
    status, _, data = client.request("GET", "/?token=wrong", cookie=False)
    assert status == 403 and error_of(data)["code"] == "bad_token"
    token = client.token
    status, headers, page = client.request("GET", f"/?token={token}", cookie=False)
    assert status == 200 and b'content="0;url=/#write=' in page
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"glasskit_review_{client.port}=")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    status, _, data = client.request("GET", f"/?token={token}", cookie=False)
    assert status == 403 and "already used" in error_of(data)["message"]


def test_the_cookie_alone_cannot_write(served: tuple[Client, Path]) -> None:
    """What a thief of the cookie (sent to every port of 127.0.0.1) can do: read, not write."""
    client, root = served
    before = (root / "cases" / "clip.yaml").read_bytes()
    body = _save_body(client, [{"at": 0.2, "expect": "stolen"}])
    status, _, page = client.request("GET", "/")
    assert status == 200 and b"write=" not in page and client.csrf and client.csrf.encode() not in page
    for headers in ({}, {"Origin": client.origin}, {"Origin": client.origin, "X-CSRF-Token": "x.y"}):
        status, _, data = client.request("PUT", SAVE, json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", **headers})
        assert status == 403 and error_of(data)["code"] in ("wrong_origin", "bad_csrf"), headers
    # A second login (another browser) gets its own session; keys do not cross sessions.
    other = Client.__new__(Client)
    other.__dict__.update(client.__dict__)
    other.login()
    assert other.cookie != client.cookie
    status, _, data = client.request("PUT", SAVE, json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "Origin": client.origin, "X-CSRF-Token": other.csrf or ""})
    assert status == 403 and error_of(data)["code"] == "bad_csrf"
    assert (root / "cases" / "clip.yaml").read_bytes() == before
    assert client.put_json(SAVE, body)[0] == 200  # its own key works


def test_security_headers_on_pages_and_errors(served: tuple[Client, Path]) -> None:
    client, _ = served
    for path, cookie in (("/", True), ("/api/cases", True), ("/nowhere", True), ("/api/cases", False)):
        _, headers, _ = client.request("GET", path, cookie=cookie)
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"


def test_static_assets_come_from_the_package(served: tuple[Client, Path]) -> None:
    client, _ = served
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css"), ("timeline.js", "text/javascript")):
        status, headers, data = client.request("GET", f"/static/{name}")
        assert status == 200 and headers["content-type"].startswith(kind) and data
    status, _, page = client.request("GET", "/")
    assert b"__CSRF_TOKEN__" not in page and b"<script type=\"module\" src=\"/static/app.js\">" in page


@pytest.mark.parametrize("path", [
    "/static/../api.py", "/static/..%2Fapi.py", "/static/%2e%2e%2fserver.py", "/static/index.html",
    "/api/cases/..%2F..%2Fetc%2Fpasswd", "/api/cases/../cases/clip", "/api/cases/%2e%2e",
    "/api/cases/clip.yaml", "/api/cases/..%2Fcases%2Fclip/video", "/api/cases/clip/../../config",
    "/../../etc/passwd", "/api/cases/%00",
])
def test_traversal_attempts_find_nothing(served: tuple[Client, Path], path: str) -> None:
    client, _ = served
    status, _, data = client.request("GET", path)
    assert status == 404, (path, data)
    assert error_of(data)["code"] == "not_found"


# --- writes: CSRF, content type, size ----------------------------------------------------------


def _save_body(client: Client, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"revision": client.get_json("/api/cases/clip")["revision"], "blocks": blocks}


SAVE = "/api/cases/clip/targets/door/samples"
BLOCKS = [{"at": 0.5, "expect": "closed"}, {"range": [1.0, 1.5], "expect": "open"}]


def test_writes_need_the_csrf_token(served: tuple[Client, Path]) -> None:
    client, root = served
    before = (root / "cases" / "clip.yaml").read_bytes()
    body = _save_body(client, [{"at": 0.2, "expect": "x"}])
    real = client.csrf or ""
    tampered = real[:-1] + ("1" if real.endswith("0") else "0")  # one character off, never the real one
    for token in ("", "nonsense", "abc.def", tampered):
        status, error = client.put_json(SAVE, body, csrf=token)
        assert status == 403 and error["code"] == "bad_csrf"
    status, error = client.put_json(SAVE, body, csrf=client.csrf, content_type="text/plain")
    assert status == 415 and error["code"] == "unsupported_media_type"
    status, _, data = client.request("PUT", SAVE, json.dumps(body).encode(), headers={
        "Content-Type": "application/json", "X-CSRF-Token": client.csrf or "", "Origin": "http://evil.example"})
    assert status == 403 and error_of(data)["code"] == "wrong_origin"
    status, _, data = client.request("PUT", SAVE, json.dumps(body).encode(), cookie=False, headers={
        "Content-Type": "application/json", "X-CSRF-Token": client.csrf or ""})
    assert status == 401
    assert (root / "cases" / "clip.yaml").read_bytes() == before


def test_huge_body_is_refused_from_content_length_alone(served: tuple[Client, Path]) -> None:
    client, _ = served
    # Declares 50 MB but sends nothing: the answer must come without reading the body.
    status, headers, data = client.request("PUT", SAVE, b"", headers={
        "Content-Type": "application/json", "X-CSRF-Token": client.csrf or "", "Content-Length": str(50 << 20),
        "Origin": client.origin})
    assert status == 413 and error_of(data)["code"] == "body_too_large"
    assert headers.get("connection") == "close"
    status, _, data = client.request("PUT", SAVE, b"", headers={
        "Content-Type": "application/json", "X-CSRF-Token": client.csrf or "", "Transfer-Encoding": "chunked",
        "Origin": client.origin})
    assert status == 411


def test_bad_json_and_bad_shapes(served: tuple[Client, Path]) -> None:
    client, _ = served
    status, _, data = client.request("PUT", SAVE, b"{not json", headers={
        "Content-Type": "application/json", "X-CSRF-Token": client.csrf or "", "Origin": client.origin})
    assert status == 400 and error_of(data)["code"] == "bad_json"
    status, error = client.put_json(SAVE, {"blocks": []})
    assert status == 400 and "revision" in error["message"]
    status, error = client.put_json(SAVE, {"revision": "x", "blocks": ["at 1"]})
    assert status in (409, 422)
    status, error = client.put_json("/api/cases/clip/targets/nope/samples", _save_body(client, BLOCKS))
    assert status == 404 and "nope" in error["message"]
    status, error = client.put_json("/api/cases/other/targets/door/samples", {"revision": "x", "blocks": []})
    assert status == 404
    status, _, data = client.request("POST", "/api/cases", b"{}", headers={"Content-Type": "application/json"})
    assert status == 405 and error_of(data)["code"] == "method_not_allowed"


def test_a_body_nested_deeper_than_the_parser_goes_is_bad_json(served: tuple[Client, Path]) -> None:
    client, _ = served
    for body in (b"[" * 100_000 + b"]" * 100_000, b'{"revision": "x", "blocks": ' + b"[" * 200 + b"]" * 200 + b"}"):
        status, _, data = client.request("PUT", SAVE, body, headers={
            "Content-Type": "application/json", "X-CSRF-Token": client.csrf or "", "Origin": client.origin})
        assert status == 400 and error_of(data)["code"] == "bad_json", data
        assert "levels deep" in error_of(data)["message"] and "Traceback" not in data.decode()


# --- saving ------------------------------------------------------------------------------------


def test_save_keeps_comments_and_untouched_lines(served: tuple[Client, Path]) -> None:
    client, root = served
    blocks = [*BLOCKS, {"at": 1.8, "expect": "closed", "comment": "door swings back"}]
    status, detail = client.put_json(SAVE, _save_body(client, blocks))
    assert status == 200, detail
    text = (root / "cases" / "clip.yaml").read_text()
    for line in FRAMES_CASE.splitlines():
        assert line in text.splitlines()
    assert "at: 1.8" in text and "door swings back" in text
    assert detail["saved"] == {"fallback": False, "reason": None, "changed": True}
    door = detail["targets"][0]
    assert [b["times"] for b in door["blocks"]] == [[0.5], [1.0], [1.8]]
    assert door["blocks"][1]["raw"]["range"] == [1.0, 1.5]


def test_json_numbers_do_not_rewrite_untouched_blocks(served: tuple[Client, Path]) -> None:
    client, root = served
    # JavaScript sends 1.0 as 1: the file keeps its own spelling.
    blocks = [{"at": 0.5, "expect": "ajar"}, {"range": [1, 1.5], "expect": "open"}]
    status, _ = client.put_json(SAVE, _save_body(client, blocks))
    assert status == 200
    text = (root / "cases" / "clip.yaml").read_text()
    assert "- range: [1.0, 1.5]" in text and "expect: ajar" in text


def test_concurrent_edits_conflict_instead_of_overwriting(served: tuple[Client, Path]) -> None:
    client, root = served
    body = _save_body(client, [*BLOCKS, {"at": 1.9, "expect": "first"}])
    stale = dict(body, blocks=[*BLOCKS, {"at": 1.9, "expect": "second"}])
    assert client.put_json(SAVE, body)[0] == 200
    status, error = client.put_json(SAVE, stale)
    assert status == 409 and error["code"] == "conflict"
    assert error["revision"] != stale["revision"]
    assert "first" in (root / "cases" / "clip.yaml").read_text()

    # A change made in an editor to the same block while the page was open is a conflict too.
    fresh = _save_body(client, [*BLOCKS[:1], {"range": [1.0, 1.5], "expect": "ajar"}])
    path = root / "cases" / "clip.yaml"
    edited = path.read_text().replace("expect: open", "expect: shut") + "# edited elsewhere\n"
    path.write_text(edited)
    status, error = client.put_json(SAVE, fresh)
    assert status == 409 and "in the same samples of 'door' you edited" in error["message"]
    assert path.read_text() == edited


def test_an_edit_after_an_unrelated_change_on_disk_is_merged_onto_it(served: tuple[Client, Path]) -> None:
    client, root = served
    path = root / "cases" / "clip.yaml"
    body = _save_body(client, [{"at": 0.5, "expect": "shut"}, BLOCKS[1]])
    # Meanwhile, in an editor: the description and the other block change.
    edited = path.read_text().replace("# A hand-written case", "# An edited case").replace(
        "expect: open", "expect: wide open")
    path.write_text(edited)
    status, detail = client.put_json(SAVE, body)
    assert status == 200, detail
    assert detail["saved"]["merged"] is True and detail["saved"]["before"]["text"] == edited
    assert path.read_text() == edited.replace("expect: closed", "expect: shut")


def test_simultaneous_saves_with_one_revision_let_exactly_one_win(served: tuple[Client, Path]) -> None:
    client, _ = served
    revision = client.get_json("/api/cases/clip")["revision"]
    results: list[int] = []

    def save(label: str) -> None:
        results.append(client.put_json(SAVE, {"revision": revision,
                                              "blocks": [*BLOCKS, {"at": 1.9, "expect": label}]})[0])

    threads = [threading.Thread(target=save, args=(f"v{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [409] * 5


@pytest.mark.parametrize(("blocks", "needle"), [
    ([{"at": 0.5, "expect": "a"}, {"range": [0.2, 0.8], "expect": "b"}], "overlaps"),
    ([{"at": 0.5, "expect": 1, "compare": {"mode": "fuzzy"}}], "unknown comparison mode"),
    ([{"at": 0.5, "expect": "a", "every_s": 0.1}], "every_s only applies to range blocks"),
    ([{"range": [1.0, 0.5], "expect": "a"}], "range end must be greater than start"),
    ([{"at": -1, "expect": "a"}], "nonnegative"),
    ([{"at": 0.5, "expect": "a", "ignore": ""}], "ignore must not be empty"),
    ([{"at": 0.5, "expect": "a", "colour": "red"}], "unknown key 'colour'"),
    ([{"at": 30, "expect": "a"}], "past the end of the video"),
])
def test_invalid_edits_are_refused_with_the_validator_message(served: tuple[Client, Path], blocks: list[Any],
                                                                needle: str) -> None:
    client, root = served
    before = (root / "cases" / "clip.yaml").read_bytes()
    status, error = client.put_json(SAVE, _save_body(client, blocks))
    assert status == 422, error
    assert error["code"] == "invalid_edit"
    assert needle in error["message"] or any(needle in p for p in error.get("problems", []))
    assert (root / "cases" / "clip.yaml").read_bytes() == before


# --- reads ----------------------------------------------------------------------------------------


def test_case_list_reports_ready_drafts_and_invalid(served: tuple[Client, Path]) -> None:
    client, root = served
    (root / "cases" / "drafty.yaml").write_text("video: clip.mp4\ntargets:\n  t:\n    samples:\n"
                                                "      - at: 0.1\n      - at: 0.2\n        ignore: blurry\n")
    (root / "cases" / "broken.yaml").write_text("video: clip.mp4\ntargets:\n  t:\n    samples:\n"
                                                "      - at: 0.1\n        expect: 1\n        compare: {mode: nope}\n")
    cases = {c["id"]: c for c in client.get_json("/api/cases")["cases"]}
    assert cases["clip"]["status"] == "ready" and cases["clip"]["sample_count"] == 2
    assert cases["drafty"]["status"] == "drafts" and cases["drafty"]["drafts"] == 1
    assert cases["broken"]["status"] == "invalid"
    assert "unknown comparison mode" in cases["broken"]["problems"][0]["text"]
    detail = client.get_json("/api/cases/broken")
    assert detail["editable"] is False and "mode: nope" in detail["source"]


def test_case_detail_expands_blocks(served: tuple[Client, Path]) -> None:
    client, _ = served
    detail = client.get_json("/api/cases/clip")
    assert detail["video"]["frame_count"] == 20 and detail["video"]["duration_s"] == 2.0
    door = detail["targets"][0]
    assert door["id"] == "door"
    assert door["blocks"][1]["times"] == [1.0] and door["blocks"][1]["every_s"] == 0.5
    assert door["blocks"][0]["raw"] == {"at": 0.5, "expect": "closed"}
    assert len(detail["revision"]) == 64


def test_exact_frame_matches_the_engine(served: tuple[Client, Path]) -> None:
    client, _ = served
    for t, index in (("0", 0), ("0.25", 2), ("0.26", 3), ("1.94", 19), ("2.02", 19)):
        status, headers, data = client.request("GET", f"/api/cases/clip/frame?t={t}")
        assert status == 200 and headers["content-type"] == "image/png"
        assert int(headers["x-frame-index"]) == index
        assert Fraction(headers["x-media-time"]) == Fraction(index, 10)
        assert len(headers["x-pixel-hash"]) == 64
        with Image.open(io.BytesIO(data)) as image:
            assert read_frame_index(image.convert("RGB")) == index
    status, _, data = client.request("GET", "/api/cases/clip/frame?t=9")
    assert status == 422 and "past the end" in error_of(data)["message"]
    for bad in ("", "abc", "-1", "nan", "1" * 50, "1e999999999", "1e-999999999"):
        status, _, data = client.request("GET", f"/api/cases/clip/frame?t={bad}")
        assert status == 400, bad
        error_of(data)


def test_frame_table_and_thumbnails(served: tuple[Client, Path]) -> None:
    client, _ = served
    table = client.get_json("/api/cases/clip/frames")
    assert table["count"] == 20 and table["times"][:3] == [0.0, 0.1, 0.2]
    thumbs = client.get_json("/api/cases/clip/thumbs?t=0.1,0.2,0.3")["thumbs"]
    assert [t["frame_index"] for t in thumbs] == [1, 2, 3]
    assert all(t["src"].startswith("data:image/jpeg;base64,") for t in thumbs)
    status, _, _ = client.request("GET", "/api/cases/clip/thumbs?t=" + ",".join(["0.1"] * 40))
    assert status == 400


@pytest.mark.parametrize("name", ["vfr_h264.mp4", "bframes_h264.mp4", "start_offset_bframes_h264.mov",
                                  "vp9.webm", "rotate90.mp4"])
def test_frame_table_steps_land_on_consecutive_frames(name: str) -> None:
    path = VIDEOS / name
    table = frame_table(path)
    got = [frame.index for _t, frame in decode_at(path, list(table))]
    assert got == list(range(len(table)))


# --- video bytes -----------------------------------------------------------------------------------


def test_video_ranges_etag_and_head(served: tuple[Client, Path]) -> None:
    client, root = served
    data = (root / "cases" / "clip.mp4").read_bytes()
    size = len(data)
    url = "/api/cases/clip/video"
    status, headers, body = client.request("GET", url)
    assert status == 200 and body == data and headers["accept-ranges"] == "bytes"
    assert headers["content-type"] == "video/mp4"
    etag = headers["etag"]
    status, headers, body = client.request("GET", url, headers={"Range": "bytes=10-19"})
    assert status == 206 and body == data[10:20] and headers["content-range"] == f"bytes 10-19/{size}"
    status, headers, body = client.request("GET", url, headers={"Range": "bytes=-5"})
    assert status == 206 and body == data[-5:]
    status, headers, body = client.request("GET", url, headers={"Range": f"bytes={size - 3}-"})
    assert status == 206 and body == data[-3:]
    status, headers, body = client.request("GET", url, headers={"Range": f"bytes=0-{size * 2}"})
    assert status == 206 and body == data
    status, headers, body = client.request("GET", url, headers={"Range": f"bytes={size}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{size}"
    status, _, body = client.request("GET", url, headers={"Range": "bytes=0-1,5-6"})
    assert status == 200 and body == data
    status, _, body = client.request("GET", url, headers={"Range": "bytes=2-3", "If-Range": etag})
    assert status == 206 and body == data[2:4]
    status, _, body = client.request("GET", url, headers={"Range": "bytes=2-3", "If-Range": '"stale"'})
    assert status == 200 and body == data
    status, _, body = client.request("GET", url, headers={"If-None-Match": etag})
    assert status == 304 and body == b""
    status, headers, body = client.request("HEAD", url)
    assert status == 200 and body == b"" and headers["content-length"] == str(size)
    status, headers, body = client.request("HEAD", url, headers={"Range": "bytes=0-9"})
    assert status == 206 and body == b"" and headers["content-length"] == "10"


def test_parse_range_edge_cases() -> None:
    assert parse_range(None, 100) is None
    assert parse_range("bytes=0-0", 100) == (0, 0)
    assert parse_range("bytes=-200", 100) == (0, 99)
    assert parse_range("items=0-5", 100) is None
    assert parse_range("bytes=5-2", 100) is None
    assert parse_range("bytes=x-2", 100) is None


# --- report overlay, deep link and the command line ---------------------------------------------------


def test_report_markers_and_deep_link(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root)
    report = tmp_path / "results.json"
    assert main(["run", "--eval-dir", str(root), "--output-json", str(report)], out=io.StringIO()) == 0
    server = start_review(ReviewOptions(eval_dir=root, case="kitchen", target="brightness",
                                        time=Fraction("2.5"), report=report))
    thread = serve_in_thread(server)
    try:
        client = Client(server)
        client.login()
        assert client.get_json("/api/session")["initial"] == {"case": "kitchen", "target": "brightness", "time": 2.5}
        markers = client.get_json("/api/cases/kitchen")["markers"]
        assert {m["status"] for m in markers} <= {"passed", "failed", "error", "ignored"}
        assert any(m["target"] == "lights_on" and m["time_s"] == 2.0 and m["observed_value"] is True for m in markers)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("args", "needle"), [
    (["--eval-dir", "{missing}"], "does not exist"),
    (["--target", "door"], "--target needs --case"),
    (["--time", "1"], "--time needs --case"),
    (["--case", "nope"], "unknown case 'nope'"),
    (["--case", "clip", "--target", "nope"], "unknown target 'nope'"),
    (["--case", "../clip"], "not a path"),
    (["--time", "-1", "--case", "clip"], "nonnegative"),
    (["--report", "{missing}"], "no such report file"),
    (["--port", "70000"], "65535"),
])
def test_cli_refuses_bad_options_with_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    root = make_eval(tmp_path)
    args = [a.replace("{missing}", str(tmp_path / "missing")) for a in args]
    if "--eval-dir" not in args:
        args = ["--eval-dir", str(root), *args]
    out, err = io.StringIO(), io.StringIO()
    assert main(["review", "--no-open", *args], out=out, err=err) == 2
    assert needle in err.getvalue()


def test_cli_port_in_use_exits_2(tmp_path: Path) -> None:
    root = make_eval(tmp_path)
    busy = start_review(ReviewOptions(eval_dir=root))
    try:
        err = io.StringIO()
        assert main(["review", "--no-open", "--eval-dir", str(root), "--port", str(busy.port)],
                    out=io.StringIO(), err=err) == 2
        assert "cannot start the review server" in err.getvalue()
    finally:
        busy.server_close()


def test_subprocess_serves_then_exits_0_on_ctrl_c(tmp_path: Path) -> None:
    root = make_eval(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", "review", "--eval-dir", str(root), "--no-open"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
        assert match, line
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=30)
        conn.request("GET", f"/?token={match.group(2)}")
        assert conn.getresponse().status == 200
        conn.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


BROWSER_SCRIPT = """\
import sys
from pathlib import Path
Path(sys.argv[1]).write_text("\\n".join(sys.argv[2:]))
"""


def test_the_browser_is_started_on_a_private_login_file_not_on_the_token(tmp_path: Path) -> None:
    """What `ps` shows of the browser `review` starts: a file name, never the token."""
    root = make_eval(tmp_path)
    argv_log = tmp_path / "browser-argv.txt"
    script = tmp_path / "browser.py"
    script.write_text(BROWSER_SCRIPT)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "BROWSER": f"{sys.executable} {script} {argv_log} %s", "XDG_RUNTIME_DIR": str(runtime)}
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", "review", "--eval-dir", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert "token" not in lines[0] and "Review UI: http://127.0.0.1:" in lines[0], lines
        port = int(re.search(r"127\.0\.0\.1:(\d+)/", lines[0]).group(1))  # type: ignore[union-attr]
        while not (argv_log.exists() and argv_log.read_text()):  # the "browser" runs after those lines
            assert proc.poll() is None, proc.communicate()
            threading.Event().wait(0.05)
        argv = argv_log.read_text().split("\n")
        assert not [a for a in argv if "token" in a], argv
        assert len(argv) == 1 and argv[0].startswith("file://")
        login = Path(urllib.parse.unquote(urllib.parse.urlsplit(argv[0]).path))
        assert login.parent.parent == runtime and argv[0] in lines[1]
        assert stat.S_IMODE(login.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(login.stat().st_mode) == 0o600
        first = re.search(r'url=http://127\.0\.0\.1:\d+/\?token=([\w-]+)"', login.read_text())
        assert first, login.read_text()

        def log_in(token: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", f"/?token={token}")
                return conn.getresponse().status
            finally:
                conn.close()

        assert log_in(first.group(1)) == 200
        assert log_in(first.group(1)) == 403  # spent
        second = re.search(r'token=([\w-]+)"', login.read_text())
        assert second and second.group(1) != first.group(1)
        assert log_in(second.group(1)) == 200  # the renewed file logs in the next browser
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert not login.parent.exists()  # removed at exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_no_place_for_the_login_file_is_exit_2_and_frees_the_port(tmp_path: Path) -> None:
    from glasskit_eval.errors import UsageError
    from glasskit_eval.review.server import run

    server = start_review(ReviewOptions(eval_dir=make_eval(tmp_path)))
    port = server.port
    with pytest.raises(UsageError) as info:
        run(server, io.StringIO(), open_browser=False, login_dir=str(tmp_path / "missing"))
    assert f"cannot create the private login file in {tmp_path / 'missing'}" in str(info.value)
    start_review(ReviewOptions(eval_dir=tmp_path / "eval", port=port)).server_close()  # the port is free again
