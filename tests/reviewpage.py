"""Helpers for the review page in a real headless Chromium (Debian's ``chromium`` under Playwright).

Chromium comes from ``chromiumkit`` (skipped without it, except in CI). One browser serves a test
module; every test gets its own server, eval directory and browser context.

Screenshots named by tests go to ``$GLASSKIT_REVIEW_SCREENS`` when set (kept for people to
look at), else into the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import VIEWPORT, launched
from PIL import Image

from glasskit_eval.commands.review import ReviewOptions, start_review
from glasskit_eval.review.server import ReviewServer, serve_in_thread

REPO = Path(__file__).resolve().parent.parent
VIDEOS = REPO / "fixtures" / "videos"
DEMO = REPO / "fixtures" / "demo" / "eval"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched() as chromium:
        yield chromium


def make_eval(tmp_path: Path, case_text: str, *, video: Path = VIDEOS / "cfr_h264.mp4", name: str = "clip",
              adapter: bool = False) -> Path:
    root = tmp_path / "eval"
    (root / "cases").mkdir(parents=True)
    shutil.copy(video, root / "cases" / video.name)
    (root / "cases" / f"{name}.yaml").write_bytes(case_text.encode("utf-8"))
    if adapter:
        for part in ("adapter.py", "adapter.yaml"):
            shutil.copy(DEMO / part, root / part)
    return root


def run_report(root: Path, out: Path) -> Path:
    """A real `run --output-json` report of the eval (the demo adapter must be in place).

    In a subprocess: `run` starts its own event loop, and Playwright's runs in this thread.
    """
    proc = subprocess.run([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(root),
                           "--output-json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode in (0, 1) and out.exists(), proc.stderr
    return out


@contextmanager
def served(root: Path, **options: Any) -> Iterator[ReviewServer]:
    server = start_review(ReviewOptions(eval_dir=root, **options))
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Page:
    """One logged-in tab, with the page's console errors collected."""

    def __init__(self, tab: Any, problems: list[str]) -> None:
        self.tab = tab
        self.problems = problems

    def frame(self, index: int) -> None:
        self.tab.wait_for_selector(f"#frame-label[data-index='{index}']")
        assert f"Exact eval frame {index} " in self.tab.inner_text("#frame-label")

    def saves(self, count: int) -> None:
        """Wait until `count` writes have completed (the status shows 'Saved' or a refusal)."""
        self.tab.wait_for_selector(f"#save-status[data-saves='{count}']:not(.saving)")

    def saves_now(self) -> int:
        return int(self.tab.get_attribute("#save-status", "data-saves") or 0)

    def press(self, *keys: str) -> None:
        for key in keys:
            self.tab.keyboard.press(key)

    def tick(self, target: str, time: float) -> Any:
        # data-time is JavaScript's spelling of the number: 1 for 1.0.
        return self.tab.locator(f".tl-row[data-target='{target}'] .tl-at[data-time='{time:g}']")

    def select_tick(self, target: str, time: float) -> None:
        self.tick(target, time).click()
        self.tab.wait_for_selector(f".tl-row[data-target='{target}'] .tl-at.selected[data-time='{time:g}']")

    def range_bar(self, target: str, block: int) -> Any:
        return self.tab.locator(f".tl-row[data-target='{target}'] .tl-range[data-block='{block}']")

    def range_handle(self, target: str, block: int, edge: str) -> Any:
        return self.range_bar(target, block).locator(f".tl-handle.{edge}")

    def select_range(self, target: str, block: int) -> None:
        """Select a range by keyboard (focus, Enter): the playhead goes to the range's start."""
        self.range_bar(target, block).focus()
        self.tab.keyboard.press("Enter")
        self.tab.wait_for_selector(f".tl-row[data-target='{target}'] .tl-range.selected[data-block='{block}']")

    def focus_target(self, target: str) -> None:
        self.tab.click(f".tl-name[data-target='{target}']")
        self.tab.wait_for_selector(f".tl-row.active[data-target='{target}']")

    def seek(self, time: float) -> None:
        self.tab.fill("#time-input", str(time))
        self.tab.press("#time-input", "Enter")
        self.tab.wait_for_selector("#frame-label:not(.stale)")

    def px_per_s(self) -> float:
        track = self.tab.locator(".tl-ruler .tl-track").bounding_box()
        minutes, seconds = self.tab.inner_text("#clock").split("/")[1].strip().split(":")
        duration = int(minutes) * 60 + float(seconds)  # the timeline spans the video's duration
        assert track is not None and duration > 0
        return float(track["width"]) / duration

    def drag(self, node: Any, seconds: float, *, alt: bool = False) -> None:
        """Press on the middle of `node`, move it by `seconds` of timeline in two steps, release."""
        box = node.bounding_box()
        assert box is not None
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        dx = seconds * self.px_per_s()
        self.tab.mouse.move(x, y)
        if alt:
            self.tab.keyboard.down("Alt")
        self.tab.mouse.down()
        self.tab.mouse.move(x + dx / 2, y)
        self.tab.mouse.move(x + dx, y)
        self.tab.mouse.up()
        if alt:
            self.tab.keyboard.up("Alt")

    def notice(self) -> str:
        self.tab.wait_for_selector("#notice:not([hidden])")
        return str(self.tab.inner_text("#notice-text"))

    def body_text(self) -> str:
        return str(self.tab.inner_text("body"))

    def screenshot(self, tmp_path: Path, name: str) -> Path:
        folder = Path(os.environ.get("GLASSKIT_REVIEW_SCREENS") or tmp_path)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        self.tab.wait_for_selector("#frame-label:not(.stale)")
        index = self.tab.get_attribute("#frame-label", "data-index")
        self.tab.wait_for_selector(f"#filmstrip figure.current[data-index='{index}']")
        self.tab.screenshot(path=str(path))
        with Image.open(path) as image:
            rgb = image.convert("RGB")
            colours = rgb.getcolors(maxcolors=1 << 20)
            assert colours is not None and len(colours) > 50, "screenshot looks blank"
            assert rgb.size == (VIEWPORT["width"], VIEWPORT["height"])
        return path


def _expected_refusal(text: str) -> bool:
    # Chromium logs every non-2xx fetch; a conflict (409) or a refused edit (422) is an answer
    # the page handles, not a page error.
    return text.startswith("Failed to load resource: the server responded with a status of 4") and (
        "409" in text or "422" in text)


@contextmanager
def opened(browser: Any, server: ReviewServer, *, permissions: list[str] | None = None) -> Iterator[Page]:
    with opened_at(browser, server, VIEWPORT, permissions=permissions) as page:
        yield page


@contextmanager
def opened_at(browser: Any, server: ReviewServer, viewport: dict[str, int], *,
              permissions: list[str] | None = None) -> Iterator[Page]:
    """A logged-in tab of ``viewport`` (a phone's, say)."""
    context = browser.new_context(viewport=viewport)
    if permissions:
        context.grant_permissions(permissions, origin=f"http://127.0.0.1:{server.port}")
    problems: list[str] = []
    try:
        tab = context.new_page()
        tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
               if m.type == "error" and not _expected_refusal(m.text) else None)
        tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        tab.goto(server.login_url)
        tab.wait_for_selector("#frame-label[data-index]")
        yield Page(tab, problems)
    finally:
        context.close()
