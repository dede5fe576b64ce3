"""The review page in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Skipped when Playwright or Chromium is missing, except in CI (``CI=true``), where the
browser is installed by ``.ci/run`` and a missing one is a failure.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from glasskit_eval.review.launch import ReviewOptions, start_review
from glasskit_eval.review.server import ReviewServer, serve_in_thread

REPO = Path(__file__).resolve().parent.parent
VIDEOS = REPO / "fixtures" / "videos"
CHROMIUM = os.environ.get("GLASSKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

CASE = """\
# Door states, labelled by hand. This comment must survive the browser's edits.
video: clip.mp4
targets:
  door:
    label: Door
    samples:
      - at: 0.5   # closed at first
        expect: closed
      - range: [1.0, 1.5]
        expect: open
  light:
    samples:
      - at: 0.2
        expect: false
"""


def _need_browser() -> Any:
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright for Python is not installed (pip install playwright)"
    if reason is None and not Path(CHROMIUM).exists():
        reason = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    return sync_playwright


@pytest.fixture
def review(tmp_path: Path) -> Iterator[tuple[ReviewServer, Path]]:
    root = tmp_path / "eval"
    (root / "cases").mkdir(parents=True)
    shutil.copy(VIDEOS / "cfr_h264.mp4", root / "cases" / "clip.mp4")
    (root / "cases" / "clip.yaml").write_text(CASE, encoding="utf-8")
    server = start_review(ReviewOptions(eval_dir=root))
    thread = serve_in_thread(server)
    try:
        yield server, root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def page(review: tuple[ReviewServer, Path], tmp_path: Path) -> Iterator[tuple[Any, list[str]]]:
    sync_playwright = _need_browser()
    server, _ = review
    problems: list[str] = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1400, "height": 950})
        try:
            tab = context.pages[0] if context.pages else context.new_page()
            tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            tab.goto(server.login_url)
            tab.wait_for_selector("#frame-label[data-index]")
            yield tab, problems
        finally:
            context.close()


def _frame_index(tab: Any, index: int) -> None:
    tab.wait_for_selector(f"#frame-label[data-index='{index}']")
    assert f"Exact eval frame {index} " in tab.inner_text("#frame-label")


def _saves(tab: Any, count: int) -> None:
    tab.wait_for_selector(f"#save-status[data-saves='{count}']")


def test_label_a_video_end_to_end(page: tuple[Any, list[str]], review: tuple[ReviewServer, Path],
                                  tmp_path: Path) -> None:
    tab, problems = page
    _, root = review
    case_file = root / "cases" / "clip.yaml"

    # Opens on the first sample of the first target: 0.5 s is frame 5 of the 10 fps clip.
    _frame_index(tab, 5)
    assert "ready" in tab.inner_text("#case-list")
    tab.keyboard.press(".")
    _frame_index(tab, 6)
    tab.keyboard.press(",")
    tab.keyboard.press(",")
    _frame_index(tab, 4)
    tab.wait_for_selector("#filmstrip figure.current")

    # Add a sample at frame 18 (1.8 s): it copies the nearest earlier expectation ("open").
    tab.keyboard.press("End")
    _frame_index(tab, 19)
    tab.keyboard.press(",")
    _frame_index(tab, 18)
    tab.keyboard.press("a")
    _saves(tab, 1)
    text = case_file.read_text()
    assert "- at: 1.8" in text and text.count("expect: open") == 2

    # Edit its value in the inspector; autosave writes it.
    tab.fill("#f-string", "ajar")
    _saves(tab, 2)
    text = case_file.read_text()
    assert "expect: ajar" in text

    # Drag the range 0.2 s to the right: [1.0, 1.5] becomes [1.2, 1.7].
    bar = tab.locator(".tl-row[data-target='door'] .tl-range")
    box = bar.bounding_box()
    assert box is not None
    px = box["width"] * 0.4
    tab.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tab.mouse.down()
    tab.mouse.move(box["x"] + box["width"] / 2 + px / 2, box["y"] + box["height"] / 2)
    tab.mouse.move(box["x"] + box["width"] / 2 + px, box["y"] + box["height"] / 2)
    tab.mouse.up()
    _saves(tab, 3)
    assert "range: [1.2, 1.7]" in case_file.read_text()

    # Select the new sample from the samples table and delete it.
    tab.click(".tab[data-tab='samples']")
    tab.click("#samples-body tr:has-text('1.8 s')")
    tab.keyboard.press("Delete")
    _saves(tab, 4)
    text = case_file.read_text()
    assert "1.8" not in text and "ajar" not in text

    # Everything outside the edited blocks is byte for byte what the user wrote.
    for line in CASE.splitlines():
        if "range" not in line:
            assert line in text.splitlines(), line

    shot = tmp_path / "review.png"
    tab.screenshot(path=str(shot))
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "screenshot looks blank"
        assert rgb.size == (1400, 950)
    assert problems == []


def test_conflict_is_shown_and_nothing_is_overwritten(page: tuple[Any, list[str]],
                                                      review: tuple[ReviewServer, Path]) -> None:
    tab, _ = page
    _, root = review
    case_file = root / "cases" / "clip.yaml"
    _frame_index(tab, 5)
    edited_elsewhere = case_file.read_text() + "# edited in another editor\n"
    case_file.write_text(edited_elsewhere)
    tab.keyboard.press("]")  # to the range block at 1.0 s
    _frame_index(tab, 10)
    tab.fill("#f-string", "half open")
    tab.wait_for_selector("#banner.conflict:not([hidden])")
    assert "changed on disk" in tab.inner_text("#banner")
    assert tab.inner_text("#save-status") == "Conflict"
    assert case_file.read_text() == edited_elsewhere
    # Reload shows the file as it is now, and editing works again.
    tab.click("#banner-reload")
    tab.wait_for_selector("#banner", state="hidden")
    assert "edited in another editor" in tab.inner_text("#source")


def test_invalid_edit_shows_the_validator_message(page: tuple[Any, list[str]],
                                                  review: tuple[ReviewServer, Path]) -> None:
    tab, _ = page
    _, root = review
    before = (root / "cases" / "clip.yaml").read_text()
    _frame_index(tab, 5)
    tab.fill("#f-at", "1.2")  # inside the range [1.0, 1.5): overlaps
    tab.wait_for_selector("#insp-error:not([hidden])")
    assert "overlaps" in tab.inner_text("#insp-error")
    assert tab.inner_text("#save-status") == "Not saved"
    assert (root / "cases" / "clip.yaml").read_text() == before


def test_help_panel_lists_the_shortcuts(page: tuple[Any, list[str]]) -> None:
    tab, problems = page
    tab.keyboard.press("?")
    tab.wait_for_selector("#help[open]")
    keys = tab.inner_text("#help-keys")
    for needle in ("Previous / next frame", "Add a sample", "Delete the selected sample", "Zoom"):
        assert needle in keys
    tab.keyboard.press("Escape")
    tab.wait_for_selector("#help:not([open])", state="attached")
    png = tab.screenshot()
    with Image.open(io.BytesIO(png)) as image:
        assert image.convert("L").getextrema()[0] != image.convert("L").getextrema()[1]
    assert problems == []
