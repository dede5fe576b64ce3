"""The review page in a real headless Chromium: labelling end to end, conflicts, keyboard use.

The editing guarantees of the page (one-timestamp edits, undo/redo, refused edits, touching
ranges, report overlay) are in test_review_browser_edits.py.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import VIEWPORT
from reviewpage import Page, browser, make_eval, opened, served

from glasskit_eval.review.server import LoginFile, ReviewServer

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

CASE = """\
# Door states, labelled by hand. This comment must survive the browser's edits.
video: cfr_h264.mp4
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


@pytest.fixture
def review(tmp_path: Path) -> Iterator[tuple[ReviewServer, Path]]:
    root = make_eval(tmp_path, CASE)
    with served(root) as server:
        yield server, root / "cases" / "clip.yaml"


@pytest.fixture
def page(browser: Any, review: tuple[ReviewServer, Path]) -> Iterator[Page]:
    with opened(browser, review[0]) as tab:
        yield tab


def test_label_a_video_end_to_end(page: Page, review: tuple[ReviewServer, Path], tmp_path: Path) -> None:
    tab = page.tab
    case_file = review[1]

    # Opens on the first sample of the first target: 0.5 s is frame 5 of the 10 fps clip.
    page.frame(5)
    assert "ready" in tab.inner_text("#case-list")
    page.press(".")
    page.frame(6)
    page.press(",", ",")
    page.frame(4)
    tab.wait_for_selector("#filmstrip figure.current")

    # Add a sample at frame 18 (1.8 s): it copies the nearest earlier expectation ("open").
    page.press("End")
    page.frame(19)
    page.press(",")
    page.frame(18)
    page.press("a")
    page.saves(1)
    text = case_file.read_text()
    assert "- at: 1.8" in text and text.count("expect: open") == 2

    # Edit its value in the inspector: typing is not saved until Enter.
    tab.fill("#f-string", "ajar")
    assert "ajar" not in case_file.read_text()
    tab.press("#f-string", "Enter")
    page.saves(2)
    assert "expect: ajar" in case_file.read_text()

    # Drag the range 0.2 s to the right: [1.0, 1.5] becomes [1.2, 1.7].
    box = page.range_bar("door", 1).bounding_box()
    assert box is not None
    px = box["width"] * 0.4
    y = box["y"] + box["height"] / 2
    tab.mouse.move(box["x"] + box["width"] / 2, y)
    tab.mouse.down()
    tab.mouse.move(box["x"] + box["width"] / 2 + px / 2, y)
    tab.mouse.move(box["x"] + box["width"] / 2 + px, y)
    tab.mouse.up()
    page.saves(3)
    assert "range: [1.2, 1.7]" in case_file.read_text()

    # Select the new sample from the samples table and delete it.
    tab.click(".tab[data-tab='samples']")
    tab.click("#samples-body tr:has-text('1.8 s')")
    page.press("Delete")
    page.saves(4)
    text = case_file.read_text()
    assert "1.8" not in text and "ajar" not in text

    # Everything outside the edited blocks is byte for byte what the user wrote.
    for line in CASE.splitlines():
        if "range" not in line:
            assert line in text.splitlines(), line
    page.screenshot(tmp_path, "end-to-end")
    assert page.problems == []


def test_conflict_is_shown_and_nothing_is_overwritten(page: Page, review: tuple[ReviewServer, Path]) -> None:
    tab = page.tab
    case_file = review[1]
    page.frame(5)
    # The same block the page edits next (an unrelated change would be merged).
    edited_elsewhere = case_file.read_text().replace("expect: open", "expect: ajar") + "# edited in another editor\n"
    case_file.write_text(edited_elsewhere)
    page.press("]")  # to the range block at 1.0 s
    page.frame(10)
    tab.fill("#f-string", "half open")
    tab.press("#f-string", "Enter")
    tab.wait_for_selector("#banner.conflict:not([hidden])")
    assert "changed on disk" in tab.inner_text("#banner") and "your edit was not written" in tab.inner_text("#banner")
    assert tab.inner_text("#save-status") == "Conflict"
    assert case_file.read_text() == edited_elsewhere
    # The page still shows the file as it last saw it, not the refused edit.
    assert tab.input_value("#f-string") == "open"
    # Reload shows the file as it is now, and editing works again.
    tab.click("#banner-reload")
    tab.wait_for_selector("#banner", state="hidden")
    assert "edited in another editor" in tab.inner_text("#source")
    page.press("y")
    tab.wait_for_selector("#save-status:has-text('Saved')")
    assert page.problems == []


def test_help_lists_every_shortcut_the_page_answers(page: Page) -> None:
    tab = page.tab
    page.press("?")
    tab.wait_for_selector("#help[open]")
    keys = tab.inner_text("#help-keys")
    for needle in ("Previous / next frame", "Add a sample", "Y / N", "S", "F / Shift + F", "O",
                   "Ctrl/⌘ + Z", "Ctrl/⌘ + Shift + Z", "Delete / Backspace", "Zoom", "Esc", "Enter",
                   "Home / End", "[ / ]", "↑ / ↓"):
        assert needle in keys, needle
    assert "Alt + drag" in tab.inner_text("#help")
    # The table the help is drawn from is the one the key handler reads: every row has a key.
    rows = tab.eval_on_selector_all("#help-keys tr", "rows => rows.map(r => r.cells[0].innerText)")
    assert len(rows) == len(set(rows)) >= 20
    page.press("Escape")
    tab.wait_for_selector("#help:not([open])", state="attached")
    assert page.problems == []


def test_keyboard_reaches_ticks_rows_figures_and_tabs(page: Page) -> None:
    tab = page.tab
    page.frame(5)
    # Ticks and bars of the timeline are focusable and Enter selects them.
    tab.focus(".tl-row[data-target='light'] .tl-at")
    assert tab.evaluate("document.activeElement.getAttribute('role')") == "button"
    assert "sample at 0.2 s" in (tab.get_attribute(".tl-row[data-target='light'] .tl-at", "aria-label") or "")
    page.press("Enter")
    page.frame(2)
    tab.wait_for_selector(".tl-row[data-target='light'] .tl-at.selected")
    assert tab.inner_text("#insp-where").startswith("light")
    # Tab order: the focused tick keeps the focus through the redraw the selection caused.
    assert tab.evaluate("document.activeElement.classList.contains('tl-at')")
    # Filmstrip frames: Space (focus reached by keyboard) seeks to that frame.
    tab.wait_for_selector("#filmstrip figure[data-index='3']")
    tab.focus("#filmstrip figure[data-index='3']")
    page.press(" ")
    page.frame(3)
    # Case and target lists: focusable, Enter chooses.
    tab.focus("#target-list li[data-target='door']")
    page.press("Enter")
    tab.wait_for_selector("#target-list li.active[data-target='door'][aria-current='true']")
    # Tabs: aria-selected, tabpanels, arrow keys move between them.
    assert tab.get_attribute("#tab-button-timeline", "aria-selected") == "true"
    assert tab.get_attribute("#tab-samples", "role") == "tabpanel"
    tab.focus("#tab-button-timeline")
    page.press("ArrowRight")
    tab.wait_for_selector("#tab-samples:not([hidden])")
    assert tab.get_attribute("#tab-button-samples", "aria-selected") == "true"
    assert tab.get_attribute("#tab-button-timeline", "aria-selected") == "false"
    assert tab.evaluate("document.activeElement.id") == "tab-button-samples"
    # Rows of the samples table: Tab reaches them, Enter selects.
    tab.focus("#samples-body tr[data-block='1']")
    page.press("Enter")
    tab.wait_for_selector("#samples-body tr.selected[data-block='1']")
    page.frame(10)
    # Keyboard focus is drawn (focus-visible), the mouse's is not.
    outline = tab.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    assert page.problems == []


def test_shortcuts_work_with_focus_anywhere_but_text_boxes(page: Page, review: tuple[ReviewServer, Path]) -> None:
    tab = page.tab
    case_file = review[1]
    page.frame(5)
    # Focus on a button clicked with the mouse: keys still drive the page.
    tab.click("#next-frame")
    page.frame(6)
    page.press(".")
    page.frame(7)
    # Focus on a checkbox, a tick and the case file view: the same.
    for selector in ("#f-ignore", ".tl-row[data-target='door'] .tl-at", "#tab-button-timeline"):
        tab.focus(selector)
        before = tab.get_attribute("#frame-label", "data-index")
        page.press(",")
        tab.wait_for_selector(f"#frame-label[data-index]:not([data-index='{before}'])")
    # Space plays even when a button clicked with the mouse still has the focus (Chromium would
    # press the button on the key's release).
    tab.click("#add-at")
    page.saves(1)
    page.press(" ")
    tab.wait_for_selector("#stage.playing")
    page.press(" ")
    tab.wait_for_selector("#stage:not(.playing)")
    page.press("?")
    tab.wait_for_selector("#help[open]")
    assert tab.is_hidden("#notice")  # no second "+ Sample" press ("a sample already exists here")
    page.press("Escape")
    page.press("Control+z")
    page.saves(2)
    # In a text box keys type: "a" adds nothing, "." steps no frame.
    tab.wait_for_selector("#frame-label:not(.stale)")
    index = tab.get_attribute("#frame-label", "data-index")
    tab.click("#f-string")
    tab.keyboard.type("a.")
    assert tab.get_attribute("#frame-label", "data-index") == index
    assert tab.input_value("#f-string") == "closeda."
    # Esc in a text box puts the saved value back; nothing was written.
    page.press("Escape")
    assert tab.input_value("#f-string") == "closed"
    assert page.saves_now() == 2 and case_file.read_text() == CASE
    assert page.problems == []


def test_the_login_file_logs_a_browser_in_and_each_link_works_once(
        browser: Any, review: tuple[ReviewServer, Path], tmp_path: Path) -> None:
    server, case_file = review
    login = LoginFile(str(tmp_path))
    login.attach(server)
    try:
        assert stat.S_IMODE(login.directory.stat().st_mode) == 0o700
        assert stat.S_IMODE(login.path.stat().st_mode) == 0o600
        first = server.login_url
        assert first.replace("&", "&amp;") in login.path.read_text()
        context = browser.new_context(viewport=VIEWPORT)
        try:
            tab = context.new_page()
            problems: list[str] = []
            tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}"))
            tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            tab.goto(login.uri)  # what the browser is started with: a file name, no token
            tab.wait_for_selector("#frame-label[data-index]")
            assert problems == []
            assert tab.url == f"http://127.0.0.1:{server.port}/"  # neither token nor write key left
            assert first not in login.path.read_text() and server.login_url in login.path.read_text()
            page = Page(tab, [])
            page.press("End", ",")
            page.press("a")
            page.saves(1)
            tab.reload()  # the tab keeps its write key
            tab.wait_for_selector("#frame-label[data-index]")
            page.press("End", ",", ",")
            page.press("a")
            page.saves(1)
            assert case_file.read_text().count("- at:") == 4

            spent = context.new_page()
            response = spent.goto(first)  # this browser's spent link: just the page, nothing new
            assert response is not None and response.status == 200 and spent.url == tab.url
        finally:
            context.close()
        stranger = browser.new_context(viewport=VIEWPORT)
        try:
            response = stranger.new_page().goto(first)
            assert response is not None and response.status == 403
            again = stranger.new_page()
            again.goto(login.uri)  # the file holds the next token: another browser logs in
            again.wait_for_selector("#frame-label[data-index]")
        finally:
            stranger.close()
    finally:
        login.detach(server)
    assert not login.directory.exists()
