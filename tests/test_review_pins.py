"""review/pins: frame-lock statuses through the review API, and the lock kept in step with its writes.

Called through ``api.handle`` (no socket); locks are written by the real ``validate --pin`` and
frames decoded from the real fixture video (10 fps: 0.5 s is frame 5, 0.6 s frame 6).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_clip_case, run_cli

from glasskit_eval.review import pins
from glasskit_eval.review.api import Request, Response, ReviewState, handle
from glasskit_eval.review.security import CSRF_HEADER, cookie_name

PORT = 8124
CASE = """\
# kept
video: clip.mp4
targets:
  door:
    samples:
      - at: [0.5, 1.5]   # two looks
        expect: closed
      - range: [1.0, 1.4]
        every_s: 0.2
        expect: open
  light:
    samples:
      - at: 0.2
        expect: false
"""


@pytest.fixture
def state(tmp_path: Path) -> ReviewState:
    return ReviewState(root=make_clip_case(tmp_path, CASE).parent.parent, port=PORT)


def lock_of(state: ReviewState) -> Path:
    return state.root / "cases" / "clip.frames.lock"


def case_file(state: ReviewState) -> Path:
    return state.root / "cases" / "clip.yaml"


def pin(state: ReviewState) -> None:
    code, out, err = run_cli("validate", "--eval-dir", state.root, "--pin")
    assert code == 0, out + err


_SESSIONS: dict[int, str] = {}


def session(state: ReviewState) -> str:
    """A logged-in session of ``state`` (as if its one-time login had happened)."""
    known = _SESSIONS.get(id(state))  # ids are reused: check that it is this state's session
    if known is None or state.secrets.session_of(f"{cookie_name(PORT)}={known}", PORT) is None:
        known = _SESSIONS[id(state)] = state.secrets.open_session()
    return known


def get(state: ReviewState, target: str) -> Any:
    hdrs = {"host": f"127.0.0.1:{PORT}", "cookie": f"{cookie_name(PORT)}={session(state)}"}
    response = handle(state, Request("GET", target, hdrs))
    assert response.status == 200, response.body
    return body_of(response)


def write(state: ReviewState, method: str, target: str, value: Any) -> Any:
    data = json.dumps(value).encode()
    hdrs = {"host": f"127.0.0.1:{PORT}", "cookie": f"{cookie_name(PORT)}={session(state)}",
            "content-type": "application/json", "content-length": str(len(data)),
            "origin": f"http://127.0.0.1:{PORT}", CSRF_HEADER: state.secrets.new_csrf_token(session(state))}
    response = handle(state, Request(method, target, hdrs, lambda n: data[:n]))
    assert response.status == 200, response.body
    return body_of(response)


def body_of(response: Response) -> Any:
    assert isinstance(response.body, bytes)
    return json.loads(response.body)


def statuses(state: ReviewState) -> dict[tuple[str, float], str]:
    body = get(state, "/api/cases/clip/pins")
    assert body["locked"] is True and body["error"] is None, body
    return {(s["target"], s["time_s"]): s["status"] for s in body["samples"]}


def lock_pins(state: ReviewState) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lock_of(state).read_text().splitlines()[1:]]


def test_a_case_without_a_lock_decodes_nothing(state: ReviewState, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_plan(root: Path, case_id: str) -> None:
        raise AssertionError("an unlocked case must not be planned or decoded")

    monkeypatch.setattr(pins, "_case_plan", no_plan)
    assert get(state, "/api/cases/clip")["frame_lock"] is None
    body = get(state, "/api/cases/clip/pins")
    assert body["locked"] is False and body["samples"] == []
    # A write to an unlocked case leaves it unlocked and says nothing about pins.
    detail = get(state, "/api/cases/clip")
    saved = write(state, "PUT", "/api/cases/clip/targets/light/samples",
                  {"revision": detail["revision"], "blocks": [{"at": 0.3, "expect": False}]})
    assert saved["saved"]["changed"] is True and "pins" not in saved["saved"]
    assert not lock_of(state).exists()


def test_statuses_after_a_time_edited_by_one_frame_and_a_damaged_lock(state: ReviewState) -> None:
    pin(state)
    detail = get(state, "/api/cases/clip")
    assert detail["frame_lock"] == "clip.frames.lock"
    assert set(statuses(state).values()) == {"ok"}
    # Edited behind the page's back: 0.5 s (frame 5) becomes 0.6 s (frame 6).
    case_file(state).write_text(CASE.replace("at: [0.5, 1.5]", "at: [0.6, 1.5]"))
    body = get(state, "/api/cases/clip/pins")
    edited = [s for s in body["samples"] if s["status"] != "ok"]
    assert [(s["target"], s["time_s"], s["block"], s["status"], s["label"], s["problem"]) for s in edited] == [
        ("door", 0.6, 0, "time_edited", "time edited", True)]
    assert "time edited from 0.5s; now frame 6 at 0.6s (pinned: frame 5 at 0.5s)" in edited[0]["message"]
    assert body["problems"] == 1 and body["counts"] == {"ok": 4, "time_edited": 1}
    # The lock's pixel hash edited, as a decoder upgrade would change it: pixels changed.
    case_file(state).write_text(CASE)
    lines = lock_of(state).read_text().splitlines()
    entry = json.loads(lines[1])
    entry["phash"] = format(int(entry["phash"], 16) ^ 0xFFFF, "016x")
    entry["pixel_sha256"] = "0" * 64
    lines[1] = json.dumps(entry, sort_keys=True)
    lock_of(state).write_text("\n".join(lines) + "\n")
    changed = {k: v for k, v in statuses(state).items() if v != "ok"}
    assert changed == {(entry["target"], float(entry["timestamp_s"])): "pixels_changed"}
    lock_of(state).write_text("{not json\n")
    body = get(state, "/api/cases/clip/pins")
    assert body["locked"] is True and body["samples"] == [] and "clip.frames.lock:1" in body["error"]


def test_statuses_are_decoded_once_per_state(state: ReviewState, monkeypatch: pytest.MonkeyPatch) -> None:
    pin(state)
    calls: list[str] = []
    real = pins._case_plan

    def counted(root: Path, case_id: str) -> Any:
        calls.append(case_id)
        return real(root, case_id)

    monkeypatch.setattr(pins, "_case_plan", counted)
    first = statuses(state)
    assert statuses(state) == first and calls == ["clip"]
    case_file(state).write_text(CASE.replace("at: [0.5, 1.5]", "at: [0.6, 1.5]"))
    assert statuses(state) != first and len(calls) == 2


def test_a_save_pins_the_edited_block_and_keeps_the_others(state: ReviewState) -> None:
    pin(state)
    before = lock_of(state).read_text()
    # A sample moved by one frame outside the page: it must stay reported after the page's edits.
    case_file(state).write_text(CASE.replace("at: 0.2", "at: 0.3"))
    detail = get(state, "/api/cases/clip")
    # Insert a block before the range: every later sample index shifts by one.
    blocks = [{"at": [0.5, 1.5], "expect": "closed"}, {"at": 0.8, "expect": "ajar"},
              {"range": [1.0, 1.4], "every_s": 0.2, "expect": "open"}]
    saved = write(state, "PUT", "/api/cases/clip/targets/door/samples",
                  {"revision": detail["revision"], "blocks": blocks})
    assert saved["saved"]["pins"] == {"repinned": 1, "error": None}
    assert statuses(state) == {("door", 0.5): "ok", ("door", 1.5): "ok", ("door", 0.8): "ok",
                               ("door", 1.0): "ok", ("door", 1.2): "ok", ("light", 0.3): "time_edited"}
    pinned = {(p["target"], p["time"]): (p["sample_index"], p["frame_index"]) for p in lock_pins(state)}
    assert pinned == {("door", "1/2"): (0, 5), ("door", "3/2"): (1, 15), ("door", "4/5"): (2, 8),
                      ("door", "1"): (3, 10), ("door", "6/5"): (4, 12), ("light", "1/5"): (5, 2)}
    # Undo writes the earlier file back: the lock is as `validate --pin` wrote it.
    restored = write(state, "PUT", "/api/cases/clip/restore",
                     {"revision": saved["revision"], "text": detail["source"]})
    assert restored["saved"]["pins"] == {"repinned": 0, "error": None}
    assert lock_of(state).read_text() == before
    # Editing the moved sample in the page accepts its new frame.
    saved = write(state, "PUT", "/api/cases/clip/targets/light/samples",
                  {"revision": restored["revision"], "blocks": [{"at": 0.3, "expect": True}]})
    assert saved["saved"]["pins"]["repinned"] == 1
    assert set(statuses(state).values()) == {"ok"}


def test_a_save_says_when_the_lock_could_not_follow(state: ReviewState) -> None:
    pin(state)
    lock_of(state).write_text("{not json\n")
    detail = get(state, "/api/cases/clip")
    saved = write(state, "PUT", "/api/cases/clip/targets/light/samples",
                  {"revision": detail["revision"], "blocks": [{"at": 0.3, "expect": False}]})
    assert saved["saved"]["changed"] is True and "at: 0.3" in case_file(state).read_text()
    assert saved["saved"]["pins"]["repinned"] == 0
    assert saved["saved"]["pins"]["error"].startswith("the frame lock was not updated: ")
    assert lock_of(state).read_text() == "{not json\n"


def test_edited_blocks_are_found_anywhere_in_the_list(state: ReviewState) -> None:
    from glasskit_eval.review.casedata import loaded_from

    old = loaded_from("clip", case_file(state), CASE.encode())
    new = loaded_from("clip", case_file(state), CASE.replace("      - range: [1.0, 1.4]",
                                                             "      - at: 0.8\n        expect: ajar\n"
                                                             "      - range: [1.0, 1.4]").encode())
    assert old.case is not None and new.case is not None
    assert pins.edited_blocks(old.case, new.case) == {("door", 1)}
    # Changing the case's default spacing changes a range's times though not its text.
    spaced = loaded_from("clip", case_file(state), CASE.replace("        every_s: 0.2\n", "").encode())
    respaced = loaded_from("clip", case_file(state), ("sampling:\n  every_s: 0.1\n"
                                                      + CASE.replace("        every_s: 0.2\n", "")).encode())
    assert spaced.case is not None and respaced.case is not None
    assert pins.edited_blocks(spaced.case, respaced.case) == {("door", 1)}


def test_statuses_agree_with_the_pinning_module_and_decode_only_new_times(
        state: ReviewState, monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval.plan import pinning

    pin(state)
    move = CASE.replace("at: 0.2", "at: 0.3")
    case_file(state).write_text(move)
    plan = pins._case_plan(state.root, "clip")
    expected = {(t, i): dict(v) for (t, i), v in pinning.case_pin_statuses(plan).items()}
    assert {(s["target"], s["sample_index"]): {"status": s["status"], "problem": s["problem"],
                                               "message": s["message"]}
            for s in get(state, "/api/cases/clip/pins")["samples"]} == expected
    decoded: list[list[float]] = []
    real = pinning.frame_pins

    def spy(video: Path, samples: Any) -> Any:
        decoded.append(sorted(float(s.time) for s in samples))
        return real(video, samples)

    monkeypatch.setattr(pinning, "frame_pins", spy)
    detail = get(state, "/api/cases/clip")
    write(state, "PUT", "/api/cases/clip/targets/door/samples",
          {"revision": detail["revision"], "blocks": [{"at": [0.5, 1.5], "expect": "closed"}, {"at": 0.8, "expect": "ajar"},
                                                      {"range": [1.0, 1.4], "every_s": 0.2, "expect": "open"}]})
    assert statuses(state)[("door", 0.8)] == "ok"
    # One decode to re-pin the new block, one for its status; the case's other frames are reused.
    assert decoded == [[0.8], [0.8]]


def test_removing_a_target_drops_its_pins_and_keeps_the_rest(state: ReviewState) -> None:
    pin(state)
    before = lock_pins(state)
    detail = get(state, "/api/cases/clip")
    removed = write(state, "DELETE", "/api/cases/clip/targets/light", {"revision": detail["revision"]})
    assert removed["saved"]["pins"] == {"repinned": 0, "error": None}
    assert lock_pins(state) == [p for p in before if p["target"] != "light"]
    assert set(statuses(state).values()) == {"ok"}


CLIPPED = """\
video: clip.mp4
targets:
  door:
    samples:
      - at: [0.5, 1.5]
        clip: {before_s: 0.4, every_s: 0.2}
        expect: closed
  light:
    samples:
      - at: 0.5
        expect: false
"""


def test_clip_samples_pins_on_the_page_and_saves_that_pin_their_clips(tmp_path: Path) -> None:
    state = ReviewState(root=make_clip_case(tmp_path, CLIPPED).parent.parent, port=PORT)
    pin(state)
    # door and light share the time 0.5 s but not the clip: each is checked against its own pin.
    assert set(statuses(state).values()) == {"ok"}
    lines = lock_of(state).read_text().splitlines()
    entry = json.loads(lines[1])
    assert [f["frame_index"] for f in entry["clip"]["frames"]] == [1, 3, 5]
    entry["clip"]["frames"][0].update(frame_index=2, media_time="1/5")
    lines[1] = json.dumps(entry, sort_keys=True)
    lock_of(state).write_text("\n".join(lines) + "\n")
    body = get(state, "/api/cases/clip/pins")
    moved = {(s["target"], s["time_s"]): s for s in body["samples"] if s["status"] != "ok"}
    assert list(moved) == [("door", 0.5)] and moved[("door", 0.5)]["status"] == "moved"
    assert "clip frame at 0.1s now resolves to frame 1 at 0.1s (pinned: frame 2 at 0.2s)" in \
        moved[("door", 0.5)]["message"]
    # A save that edits door's block pins its samples again, clip frames included.
    detail = get(state, "/api/cases/clip")
    clip = {"before_s": 0.2, "every_s": 0.1}
    saved = write(state, "PUT", "/api/cases/clip/targets/door/samples",
                  {"revision": detail["revision"], "blocks": [{"at": [0.5, 1.5], "clip": clip, "expect": "open"}]})
    assert saved["saved"]["pins"] == {"repinned": 2, "error": None}
    door = [p for p in lock_pins(state) if p["target"] == "door"]
    assert [[f["frame_index"] for f in p["clip"]["frames"]] for p in door] == [[3, 4, 5], [13, 14, 15]]
    assert set(statuses(state).values()) == {"ok"}
    assert "clip" not in next(p for p in lock_pins(state) if p["target"] == "light")
