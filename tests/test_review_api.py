"""review/api: the Request -> Response core, called directly (no socket, no server thread)."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_clip_case, make_eval
from framecode import read_frame_index
from PIL import Image

from glasskit_eval.review.api import (
    FileBody,
    Request,
    Response,
    ReviewState,
    handle,
)
from glasskit_eval.review.security import CSRF_HEADER, cookie_name

PORT = 8123
CASE = """\
# kept
video: clip.mp4
targets:
  door:
    samples:
      - at: [0.5, 1.5]   # two looks
        expect: closed
  light:
    samples:
      - at: 0.2
        expect: false
"""


@pytest.fixture
def state(tmp_path: Path) -> ReviewState:
    made = ReviewState(root=make_clip_case(tmp_path, CASE).parent.parent, port=PORT)
    _SESSIONS[id(made)] = made.secrets.open_session()
    return made


_SESSIONS: dict[int, str] = {}


def session(state: ReviewState) -> str:
    """The logged-in session the helpers below send (as if its login had happened)."""
    return _SESSIONS[id(state)]


class Reads:
    """A request body that counts how often (and how much of it) the handler read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[int] = []

    def __call__(self, length: int) -> bytes:
        self.calls.append(length)
        return self.data[:length]


def headers(state: ReviewState, **extra: str) -> dict[str, str]:
    out = {"host": f"127.0.0.1:{PORT}", "cookie": f"{cookie_name(PORT)}={session(state)}"}
    out.update(extra)
    return out


def get(state: ReviewState, target: str, method: str = "GET", **extra: str) -> Response:
    return handle(state, Request(method, target, headers(state, **extra)))


def write(state: ReviewState, method: str, target: str, value: Any, **extra: str) -> tuple[Response, Reads]:
    data = json.dumps(value).encode()
    body = Reads(data)
    hdrs = headers(state, **{"content-type": "application/json", "content-length": str(len(data)),
                             "origin": f"http://127.0.0.1:{PORT}",
                             CSRF_HEADER: state.secrets.new_csrf_token(session(state))})
    hdrs.update(extra)
    return handle(state, Request(method, target, hdrs, body)), body


def body_of(response: Response) -> Any:
    assert isinstance(response.body, bytes)
    return json.loads(response.body)


def header(response: Response, name: str) -> str | None:
    return next((v for k, v in response.headers if k.lower() == name.lower()), None)


def file_bytes(state: ReviewState) -> bytes:
    return (state.root / "cases" / "clip.yaml").read_bytes()


# --- checks before routing ---------------------------------------------------------------------


def test_host_is_checked_before_login_and_session(state: ReviewState) -> None:
    response = handle(state, Request("GET", f"/?token={state.secrets.launch_token}", {"host": "evil.example"}))
    assert response.status == 421 and body_of(response)["code"] == "wrong_host"
    assert header(response, "Set-Cookie") is None


def test_login_spends_the_token_sets_the_cookie_and_hands_out_the_write_key(state: ReviewState) -> None:
    token = state.secrets.launch_token
    response = handle(state, Request("GET", f"/?token={token}", {"host": f"localhost:{PORT}"}))
    assert response.status == 200 and header(response, "Cache-Control") == "no-store"
    cookie = header(response, "Set-Cookie") or ""
    match = re.fullmatch(rf"{cookie_name(PORT)}=([\w-]+); Path=/; HttpOnly; SameSite=Strict", cookie)
    assert match
    new_session = match.group(1)
    assert isinstance(response.body, bytes)
    refresh = re.search(rb'<meta http-equiv="refresh" content="0;url=/#write=([\w.-]+)">', response.body)
    assert refresh  # a fragment: never sent back to any server
    key = refresh.group(1).decode()
    assert state.secrets.check_csrf_token(new_session, key)
    assert not state.secrets.check_csrf_token(session(state), key)

    again = handle(state, Request("GET", f"/?token={token}", {"host": f"127.0.0.1:{PORT}"}))
    assert again.status == 403 and body_of(again)["code"] == "bad_token"
    assert "already used" in body_of(again)["message"]
    # The same browser reloading its spent link just goes to the page, with nothing new.
    reload = handle(state, Request("GET", f"/?token={token}", {"host": f"127.0.0.1:{PORT}",
                                                               "cookie": f"{cookie_name(PORT)}={new_session}"}))
    assert reload.status == 303 and header(reload, "Location") == "/" and header(reload, "Set-Cookie") is None
    assert state.secrets.launch_token != token
    wrong = handle(state, Request("GET", "/?token=nope", {"host": f"127.0.0.1:{PORT}"}))
    assert wrong.status == 403 and body_of(wrong)["code"] == "bad_token"
    head = handle(state, Request("HEAD", f"/?token={state.secrets.launch_token}", {"host": f"127.0.0.1:{PORT}"}))
    assert head.status == 401  # a link previewer's HEAD does not spend the token


def test_every_read_needs_the_session(state: ReviewState) -> None:
    for target in ("/static/app.js", "/api/session", "/api/cases", "/api/cases/clip", "/nowhere"):
        response = handle(state, Request("GET", target, {"host": f"127.0.0.1:{PORT}"}))
        assert response.status == 401 and body_of(response)["code"] == "no_session", target


def test_the_page_without_a_session_says_how_to_log_in(state: ReviewState) -> None:
    state.login_file = "file:///tmp/glasskit-review-x/login.html"
    for target in ("/", "/index.html"):
        response = handle(state, Request("GET", target, {"host": f"127.0.0.1:{PORT}"}))
        assert response.status == 401
        assert ("Content-Type", "text/html; charset=utf-8") in response.headers
        page = bytes(response.body).decode()
        assert "Log in to this review server" in page and "open the login file" in page
        assert 'href="file:///tmp/glasskit-review-x/login.html"' in page and "--no-open" in page
        assert "case" not in page.lower().replace("cases", "")  # nothing of the eval before a login


def test_write_checks_run_before_the_body_is_read(state: ReviewState) -> None:
    target = "/api/cases/clip/targets/door/samples"
    for extra in ({CSRF_HEADER: "x.y"}, {"content-type": "text/plain"}, {"origin": "http://evil.example"},
                  {"content-length": str(50 << 20)}):
        response, body = write(state, "PUT", target, {"revision": "r", "blocks": []}, **extra)
        assert response.status in (403, 413, 415), extra
        assert body.calls == [], extra
    response, body = write(state, "PUT", target, {"revision": "r", "blocks": []})
    assert response.status == 409 and len(body.calls) == 1


# --- pages and reads ------------------------------------------------------------------------------


def test_no_page_the_cookie_can_fetch_carries_a_write_key(state: ReviewState) -> None:
    for target in ("/", "/index.html", "/api/session", "/static/api.js"):
        page = get(state, target)
        assert page.status == 200 and isinstance(page.body, bytes)
        text = page.body.decode()
        for word in re.findall(r"[\w-]{20,}\.[0-9a-f]{64}", text):
            assert not state.secrets.check_csrf_token(session(state), word), target
    page = get(state, "/")
    assert header(page, "Content-Type") == "text/html; charset=utf-8"
    assert b"csrf" not in page.body  # type: ignore[operator]


def test_static_files_by_name_and_type_only(state: ReviewState) -> None:
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css"), ("api.js", "text/javascript"),
                       ("state.js", "text/javascript"), ("autosave.js", "text/javascript")):
        response = get(state, f"/static/{name}")
        assert response.status == 200, name
        assert (header(response, "Content-Type") or "").startswith(kind)
    for name in ("index.html", "nope.js", "..%2Fapi.py", "api.py", "__init__.py"):
        assert get(state, f"/static/{name}").status == 404, name


def test_head_answers_like_get_without_a_body(state: ReviewState) -> None:
    full = get(state, "/api/cases")
    head = get(state, "/api/cases", method="HEAD")
    assert head.status == 200 and head.body == b""
    assert header(head, "Content-Length") == str(len(full.body))  # type: ignore[arg-type]


def test_case_detail_is_a_revision_of_the_bytes_on_disk(state: ReviewState) -> None:
    detail = body_of(get(state, "/api/cases/clip"))
    assert detail["revision"] == hashlib.sha256(file_bytes(state)).hexdigest()
    assert detail["source"] == CASE and detail["editable"] is True
    assert [t["id"] for t in detail["targets"]] == ["door", "light"]
    assert detail["revision"] in state.revisions


def test_video_bytes_are_streamed_not_loaded(state: ReviewState) -> None:
    response = get(state, "/api/cases/clip/video", range="bytes=0-9")
    assert response.status == 206 and isinstance(response.body, FileBody)
    assert (response.body.start, response.body.length) == (0, 10)
    assert response.body.path == state.root / "cases" / "clip.mp4"


def test_unknown_routes_and_methods(state: ReviewState) -> None:
    assert body_of(get(state, "/api/nothing"))["code"] == "not_found"
    assert get(state, "/api/cases/nope").status == 404
    assert get(state, "/api/cases/clip/nothing").status == 404
    assert get(state, "/api/cases", method="OPTIONS").status == 405
    response, _ = write(state, "POST", "/api/cases", {})
    assert response.status == 405 and body_of(response)["code"] == "method_not_allowed"
    response, _ = write(state, "PUT", "/api/cases/clip/targets/door", {})
    assert response.status == 404
    response, _ = write(state, "DELETE", "/api/cases/clip", {})
    assert response.status == 404


def test_an_internal_fault_is_a_500_without_details(state: ReviewState, caplog: pytest.LogCaptureFixture) -> None:
    def broken(length: int) -> bytes:
        raise RuntimeError("disk on fire")  # a fault no real request can cause

    hdrs = headers(state, **{"content-type": "application/json", "content-length": "2",
                             "origin": f"http://127.0.0.1:{PORT}",
                             CSRF_HEADER: state.secrets.new_csrf_token(session(state))})
    with caplog.at_level(logging.ERROR, logger="glasskit_eval.review.api"):
        response = handle(state, Request("PUT", "/api/cases/clip/targets/door/samples", hdrs, broken))
    error = body_of(response)
    assert response.status == 500 and error["code"] == "internal"
    assert "disk on fire" not in error["message"] and "Traceback" not in error["message"]
    assert "disk on fire" in caplog.text


# --- writes ----------------------------------------------------------------------------------------


def test_save_answers_with_the_case_as_written(state: ReviewState) -> None:
    revision = body_of(get(state, "/api/cases/clip"))["revision"]
    blocks = [{"at": [0.5, 1.5], "expect": "closed"}, {"at": 1.8, "expect": "open"}]
    response, _ = write(state, "PUT", "/api/cases/clip/targets/door/samples", {"revision": revision, "blocks": blocks})
    detail = body_of(response)
    assert response.status == 200 and detail["saved"]["changed"] is True
    assert detail["source"].encode() == file_bytes(state)
    assert detail["revision"] == hashlib.sha256(file_bytes(state)).hexdigest()
    assert detail["revision"] in state.revisions
    unchanged, _ = write(state, "PUT", "/api/cases/clip/targets/door/samples",
                         {"revision": detail["revision"], "blocks": blocks})
    assert body_of(unchanged)["saved"]["changed"] is False


def test_restore_writes_back_only_states_the_server_has_seen(state: ReviewState) -> None:
    before = body_of(get(state, "/api/cases/clip"))
    response, _ = write(state, "PUT", "/api/cases/clip/targets/door/samples",
                        {"revision": before["revision"], "blocks": [{"at": 0.5, "expect": "closed"}]})
    after = body_of(response)
    never_seen = CASE.replace("closed", "ajar")
    response, _ = write(state, "PUT", "/api/cases/clip/restore", {"revision": after["revision"], "text": never_seen})
    assert response.status == 422 and body_of(response)["code"] == "unknown_state"
    response, _ = write(state, "PUT", "/api/cases/clip/restore", {"revision": before["revision"], "text": CASE})
    assert response.status == 409  # the file is no longer in the state the page names
    response, _ = write(state, "PUT", "/api/cases/clip/restore", {"revision": after["revision"], "text": CASE})
    assert response.status == 200 and file_bytes(state) == CASE.encode()
    assert body_of(response)["revision"] == before["revision"]


def test_remove_target_route(state: ReviewState) -> None:
    revision = body_of(get(state, "/api/cases/clip"))["revision"]
    response, _ = write(state, "DELETE", "/api/cases/clip/targets/light", {"revision": revision})
    assert response.status == 200
    assert [t["id"] for t in body_of(response)["targets"]] == ["door"]
    assert file_bytes(state) == CASE.split("  light:")[0].encode()
    response, _ = write(state, "DELETE", "/api/cases/clip/targets/light", {"revision": body_of(response)["revision"]})
    assert response.status == 404 and "light" in body_of(response)["message"]


CLIP_CASE = """\
video: clip.mp4
sample_defaults:
  clip: {before_s: 0.4, every_s: 0.2}
targets:
  door:
    samples:
      - at: [0.5, 1.5]
        expect: closed
      - at: 0.2
        clip: {before_s: 0.4, every_s: 0.1, edge: clamp}
        expect: open
      - at: 0.1
        expect: open
  light:
    samples:
      - range: [1.0, 1.4]
        every_s: 0.2
        clip: {before_s: 0.1, after_s: 0.1}
        expect: false
      - at: 0.3
        clip: null
        expect: false
"""


def test_clip_sends_the_selected_samples_window_and_exact_frames(tmp_path: Path) -> None:
    clip_state = ReviewState(root=make_clip_case(tmp_path, CLIP_CASE).parent.parent, port=PORT)
    _SESSIONS[id(clip_state)] = clip_state.secrets.open_session()
    detail = body_of(get(clip_state, "/api/cases/clip"))
    blocks = {t["id"]: t["blocks"] for t in detail["targets"]}
    # The detail carries each block's resolved setting (inherited too), never the frames.
    assert blocks["door"][0]["clip"] == {"before_s": 0.4, "after_s": 0.0, "every_s": 0.2, "edge": "error",
                                         "text": "[t-0.4, t+0.0] every 0.2s"}
    assert blocks["light"][1]["clip"] is None
    body = body_of(get(clip_state, "/api/cases/clip/clip?target=door&t=1.5"))
    assert body["time"] == "3/2" and body["block"] == 0
    clip = body["clip"]
    assert clip["window"] == [1.1, 1.5] and clip["anchor"] == 2 and clip["error"] is None
    assert [(f["t"], f["frame_index"]) for f in clip["frames"]] == [("11/10", 11), ("13/10", 13), ("3/2", 15)]
    # Clamped at the first frame; every frame of a window; exact times the /frame route accepts.
    clamped = body_of(get(clip_state, "/api/cases/clip/clip?target=door&t=0.2"))["clip"]
    assert [f["frame_index"] for f in clamped["frames"]] == [0, 1, 2] and clamped["window"] == [0.0, 0.2]
    every = body_of(get(clip_state, "/api/cases/clip/clip?target=light&t=1.2"))["clip"]
    assert [(f["t"], f["frame_index"]) for f in every["frames"]] == [("11/10", 11), ("6/5", 12), ("13/10", 13)]
    frame = get(clip_state, "/api/cases/clip/frame?t=13/10")
    assert frame.status == 200 and dict(frame.headers)["X-Frame-Index"] == "13"
    # A window before the first frame is the error validate gives; a single-frame sample has no clip.
    refused = body_of(get(clip_state, "/api/cases/clip/clip?target=door&t=0.1"))["clip"]
    assert refused["frames"] == [] and "before the video's first frame" in refused["error"]
    assert body_of(get(clip_state, "/api/cases/clip/clip?target=light&t=0.3"))["clip"] is None
    missing = get(clip_state, "/api/cases/clip/clip?target=door&t=0.7")
    assert missing.status == 404 and "no sample at 0.7s" in body_of(missing)["message"]
    assert get(clip_state, "/api/cases/clip/clip?t=0.5").status == 400


@pytest.mark.frames
def test_the_frame_route_serves_the_last_frame_up_to_its_own_end(tmp_path: Path) -> None:
    # A MediaRecorder WebM names no frame durations: its last frame, at 0.617 s, lasts as long as
    # the 250 ms gap before it, so the clip ends at 0.867 s (0.917 s with the tolerance).
    eval_dir = make_eval(tmp_path, {"rec": "video: mediarecorder_vp8.webm\ntargets:\n  t:\n    samples:\n"
                                           "      - at: 0.867\n        expect: 1\n"},
                         videos=("mediarecorder_vp8.webm",))
    rec_state = ReviewState(root=eval_dir, port=PORT)
    _SESSIONS[id(rec_state)] = rec_state.secrets.open_session()
    video = body_of(get(rec_state, "/api/cases/rec"))["video"]
    assert video["duration_s"] == 0.867 and video["last_frame_s"] == 0.617
    for t in ("867/1000", "0.917"):
        frame = get(rec_state, f"/api/cases/rec/frame?t={t}")
        assert frame.status == 200 and header(frame, "X-Frame-Index") == "10", t
        assert isinstance(frame.body, bytes)
        with Image.open(io.BytesIO(frame.body)) as image:
            assert read_frame_index(image.convert("RGB")) == 10
    beyond = get(rec_state, "/api/cases/rec/frame?t=0.918")
    assert beyond.status == 422 and "time 0.918s is past the end" in body_of(beyond)["message"]
    assert "clip length 0.867s from its first frame" in body_of(beyond)["message"]
