"""Frame-lock statuses on the review page, in a real headless Chromium.

The case is pinned by the real ``validate --pin``; then one sample's time is edited in the file
by one frame (0.5 s -> 0.6 s of the 10 fps clip) and the lock is edited so another sample's
pinned frame differs from the one its time resolves to (a moved sample). The page must show
both, on the ticks and in the inspector, reach them by keyboard, and keep the lock in step with
the edits it saves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evalkit import run_cli
from reviewpage import Page, browser, make_eval, opened, served

from glasskit_eval.review.server import ReviewServer

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

CASE = """\
video: cfr_h264.mp4
targets:
  door:
    label: Door
    samples:
      - at: 0.5
        expect: closed
      - range: [1.0, 1.6]
        every_s: 0.2
        expect: open
  light:
    samples:
      - at: 0.2
        expect: false
"""


def move_pin(lock: Path, target: str, time: str, frame: int) -> None:
    """Edit the lock so the pin of (target, time) names another frame: that sample has moved."""
    lines = lock.read_text().splitlines()
    for n, line in enumerate(lines[1:], 1):
        entry = json.loads(line)
        if (entry["target"], entry["time"]) == (target, time):
            entry.update(frame_index=frame, media_time=f"{frame}/10", media_timestamp_s=frame / 10)
            lines[n] = json.dumps(entry, sort_keys=True)
    lock.write_text("\n".join(lines) + "\n")


class ServerAndFiles:
    def __init__(self, server: ReviewServer, case: Path, lock: Path) -> None:
        self.server, self.case, self.lock = server, case, lock


@pytest.fixture
def review(tmp_path: Path) -> Iterator[tuple[ServerAndFiles, Path]]:
    root = make_eval(tmp_path, CASE)
    code, out, err = run_cli("validate", "--eval-dir", root, "--pin")
    assert code == 0, out + err
    case = root / "cases" / "clip.yaml"
    case.write_text(CASE.replace("at: 0.5", "at: 0.6"))
    move_pin(root / "cases" / "clip.frames.lock", "light", "1/5", 3)
    with served(root) as server:
        yield ServerAndFiles(server, case, root / "cases" / "clip.frames.lock"), tmp_path


@pytest.fixture
def page(browser: Any, review: tuple[ServerAndFiles, Path]) -> Iterator[Page]:
    with opened(browser, review[0].server) as tab:
        yield tab


def pins_of(lock: Path) -> dict[tuple[str, str], int]:
    return {(e["target"], e["time"]): e["frame_index"]
            for e in (json.loads(line) for line in lock.read_text().splitlines()[1:])}


def test_pin_statuses_are_shown_reached_by_keyboard_and_kept_in_step(
        page: Page, review: tuple[ServerAndFiles, Path]) -> None:
    tab = page.tab
    files, tmp_path = review
    # The page opens on door's first sample, 0.6 s: frame 6, pinned as frame 5 at 0.5 s.
    page.frame(6)
    tab.wait_for_selector("#pin-badge:not([hidden]).problem")
    assert tab.inner_text("#pin-badge") == "frame lock: 1 moved · 1 time edited"
    assert tab.inner_text("#pin-status") == "time edited"
    assert "time edited from 0.5s; now frame 6 at 0.6s (pinned: frame 5 at 0.5s)" in tab.inner_text("#pin-message")
    assert tab.inner_text("#pin-file") == "clip.frames.lock"
    door = page.tick("door", 0.6)
    assert door.get_attribute("data-pin") == "time_edited"
    assert "frame lock: time edited" in (door.get_attribute("aria-label") or "")
    assert door.locator(".tl-pin.problem").count() == 1
    assert page.tick("light", 0.2).get_attribute("data-pin") == "moved"
    # The range's samples are on their pinned frames: a plain mark, no problem dots.
    bar = page.range_bar("door", 1)
    assert bar.locator(".tl-pin.ok").count() == 1 and bar.locator(".tl-dot.pin-problem").count() == 0
    assert "frame lock: pin ok" in (bar.get_attribute("aria-label") or "")

    # Shift+P goes back to the earlier problem: light at 0.2 s, which now resolves to frame 2.
    page.press("Shift+P")
    tab.wait_for_selector(".tl-row[data-target='light'] .tl-at.selected[data-time='0.2']")
    page.frame(2)
    assert tab.inner_text("#pin-status") == "moved"
    message = tab.inner_text("#pin-message")
    assert "now resolves to frame 2 at 0.2s (pinned: frame 3 at 0.3s)" in message
    assert "same video and decoder" in message
    assert "P / Shift + P" in tab.inner_text("#help-keys")
    page.screenshot(tmp_path, "pin-status")

    # Saving an edit of the moved sample pins it again; the other problem stays reported.
    tab.click("#f-bool [data-bool='true']")
    page.saves(1)
    tab.wait_for_selector(".tl-row[data-target='light'] .tl-at[data-time='0.2'][data-pin='ok']")
    assert tab.inner_text("#pin-status") == "pin ok"
    assert tab.inner_text("#pin-badge") == "frame lock: 1 time edited"
    assert pins_of(files.lock)[("light", "1/5")] == 2
    assert pins_of(files.lock)[("door", "1/2")] == 5  # untouched: still the frame the label was made on
    # Undo writes the file back; the lock follows it (the restored block is pinned as it is now).
    page.press("Control+z")
    page.saves(2)
    tab.wait_for_selector(".tl-row[data-target='light'] .tl-at[data-time='0.2'][data-pin='ok']")
    assert "expect: false" in files.case.read_text()
    assert tab.inner_text("#pin-badge") == "frame lock: 1 time edited"
    # The samples table has the lock's word on each block.
    tab.click(".tab[data-tab='samples']")
    assert tab.is_visible("#pin-column")
    assert tab.inner_text("#samples-body tr[data-block='0'] td:last-child") == "pin ok"
    page.press("ArrowUp")  # to the door target
    tab.wait_for_selector("#samples-body tr[data-block='1']")
    assert tab.inner_text("#samples-body tr[data-block='0'] td:last-child") == "time edited"
    assert tab.inner_text("#samples-body tr[data-block='1'] td:last-child") == "pin ok"
    assert page.problems == []


def test_a_case_without_a_lock_shows_no_pin_marks(browser: Any, tmp_path: Path) -> None:
    root = make_eval(tmp_path, CASE)
    with served(root) as server, opened(browser, server) as page:
        page.frame(5)
        assert page.tab.is_hidden("#pin-badge") and page.tab.is_hidden("#insp-pin")
        assert page.tab.locator(".tl-pin").count() == 0
        assert page.tab.locator(".tl-at[data-pin]").count() == 0
        assert page.tab.locator("#samples-body tr").first.locator("td").count() == 7
        assert page.problems == []
