"""Review never surprises a labeller, in a real headless Chromium with the case file's bytes checked.

Making a sample a draft asks first; picking Number writes nothing until a number is typed; text
typed but not committed survives a reload and a tab close warns; an edit after an unrelated change
on disk is merged onto it, refused only when the same block changed; a refused tolerance says why;
and the plain URL `review` prints first opens a page that says how to log in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import CHROMIUM
from reviewpage import DEMO, Page, browser, make_eval, opened, served

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

KITCHEN = DEMO / "cases" / "kitchen.mp4"
CASE = """\
# Kitchen, labelled by hand.
video: kitchen.mp4
targets:
  door:
    samples:
      - at: [1.0, 3.0]   # two looks
        expect: false
        comment: checked twice
  brightness:
    samples:
      - at: 0.5
        field: brightness
        expect: 0.12
        compare: {mode: numeric, tolerance: 0.05}
  switch:
    samples:
      - at: 2.0
        expect: flipped
"""



@contextmanager
def kitchen(browser: Any, tmp_path: Path) -> Iterator[tuple[Page, Path]]:
    root = make_eval(tmp_path, CASE, video=KITCHEN, name="kitchen")
    with served(root) as server, opened(browser, server) as page:
        yield page, root / "cases" / "kitchen.yaml"
        assert page.problems == []


def settle(page: Page, saves: int) -> None:
    """Give a write that should not happen the time to happen, then check none did."""
    page.tab.wait_for_timeout(400)
    assert page.saves_now() == saves


def test_draft_asks_first_and_says_validate_will_fail(browser: Any, tmp_path: Path) -> None:
    with kitchen(browser, tmp_path) as (page, path):
        tab = page.tab
        page.focus_target("switch")
        page.select_tick("switch", 2.0)
        tab.select_option("#f-type", "draft")
        dialog = tab.locator("#draft-dialog")
        dialog.wait_for(state="visible")
        assert "validate" in dialog.inner_text() and "run" in dialog.inner_text()
        # Kept for people to look at when GLASSKIT_REVIEW_SCREENS names a folder (as reviewpage does).
        screens = Path(os.environ.get("GLASSKIT_REVIEW_SCREENS") or tmp_path)
        screens.mkdir(parents=True, exist_ok=True)
        for name, size in (("desktop", {"width": 1440, "height": 900}), ("phone", {"width": 390, "height": 844})):
            tab.set_viewport_size(size)
            box = dialog.bounding_box()
            assert box is not None and box["x"] >= 0 and box["y"] >= 0
            assert box["x"] + box["width"] <= size["width"] and box["y"] + box["height"] <= size["height"]
            tab.screenshot(path=str(screens / f"review-draft-prompt-{name}.png"))
        tab.click("#draft-cancel")
        dialog.wait_for(state="hidden")
        settle(page, 0)
        assert path.read_text() == CASE
        assert tab.input_value("#f-type") == "string"

        tab.select_option("#f-type", "draft")
        tab.click("#draft-confirm")
        page.saves(1)
        assert path.read_text() == CASE.replace("      - at: 2.0\n        expect: flipped\n", "      - at: 2.0\n")


def test_number_writes_nothing_until_a_number_is_typed(browser: Any, tmp_path: Path) -> None:
    with kitchen(browser, tmp_path) as (page, path):
        tab = page.tab
        page.select_tick("door", 1.0)
        tab.select_option("#f-type", "number")
        tab.wait_for_selector("#f-number:not([hidden])")
        assert tab.input_value("#f-number") == ""
        assert tab.get_attribute("#f-number", "placeholder") == "Type the expected number"
        settle(page, 0)
        assert path.read_text() == CASE
        tab.fill("#f-number", "3")
        tab.press("#f-number", "Enter")
        page.saves(1)
        assert path.read_text() == CASE.replace("        expect: false\n        comment: checked twice",
                                                "        expect: 3\n        comment: checked twice")


def test_uncommitted_text_survives_a_reload_and_a_tab_close_warns(browser: Any, tmp_path: Path) -> None:
    with kitchen(browser, tmp_path) as (page, path):
        tab = page.tab
        page.focus_target("switch")
        page.select_tick("switch", 2.0)
        tab.click("#f-comment")
        tab.keyboard.type("checked by Ana")
        dialogs: list[str] = []

        def accept(dialog: Any) -> None:
            dialogs.append(dialog.type)
            dialog.accept()

        tab.on("dialog", accept)
        tab.reload()
        tab.wait_for_selector("#frame-label[data-index]")
        tab.wait_for_selector("#f-comment.unsaved")
        assert tab.input_value("#f-comment") == "checked by Ana"
        assert "not saved yet" in page.notice()
        assert path.read_text() == CASE
        assert dialogs == ["beforeunload"]  # the reload asked first

        tab.focus("#f-comment")
        tab.locator("#f-comment").evaluate("node => node.blur()")
        page.saves(1)
        assert path.read_text() == CASE.replace("        expect: flipped\n",
                                                "        expect: flipped\n        comment: checked by Ana\n")
        # Nothing typed any more: closing asks nothing.
        tab.close(run_before_unload=True)
        assert dialogs == ["beforeunload"]


def test_a_tab_close_with_typed_text_warns(browser: Any, tmp_path: Path) -> None:
    with kitchen(browser, tmp_path) as (page, _path):
        tab = page.tab
        page.select_tick("door", 1.0)
        tab.click("#f-comment")
        tab.keyboard.type(" and a third")
        dialogs: list[str] = []

        def dismiss(dialog: Any) -> None:
            dialogs.append(dialog.type)
            dialog.dismiss()  # stay on the page

        tab.on("dialog", dismiss)
        tab.close(run_before_unload=True)
        tab.wait_for_timeout(300)
        assert dialogs == ["beforeunload"] and not tab.is_closed()


def test_an_edit_is_merged_onto_unrelated_changes_and_refused_on_the_same_block(browser: Any, tmp_path: Path) -> None:
    with kitchen(browser, tmp_path) as (page, path):
        tab = page.tab
        page.select_tick("door", 1.0)
        # Meanwhile, in an editor: the description and another target's block.
        edited = CASE.replace("# Kitchen, labelled by hand.", "# Kitchen, relabelled.").replace(
            "expect: flipped", "expect: up")
        path.write_text(edited)
        tab.fill("#f-comment", "checked three times")
        tab.locator("#f-comment").evaluate("node => node.blur()")
        page.saves(1)
        assert path.read_text() == edited.replace("comment: checked twice", "comment: checked three times")
        assert "merged" in page.notice()
        tab.wait_for_selector("#banner", state="hidden")

        # The same block changed on disk and on the page: refused, the file keeps the disk's edit.
        theirs = path.read_text().replace("comment: checked three times", "comment: by the editor")
        path.write_text(theirs)
        tab.fill("#f-comment", "by the page")
        tab.locator("#f-comment").evaluate("node => node.blur()")
        page.saves(1)
        tab.wait_for_selector("#banner:not([hidden])")
        assert "same samples of 'door'" in tab.inner_text("#banner")
        assert path.read_text() == theirs


def test_a_negative_tolerance_is_refused_with_the_reason(browser: Any, tmp_path: Path) -> None:
    with kitchen(browser, tmp_path) as (page, path):
        tab = page.tab
        page.focus_target("brightness")
        page.select_tick("brightness", 0.5)
        tab.fill("#f-tol", "-1")
        tab.press("#f-tol", "Enter")
        tab.wait_for_selector("#insp-error:not([hidden])")
        message = tab.inner_text("#insp-error")
        assert "-1 was not saved" in message and "cannot be negative" in message
        settle(page, 0)
        assert path.read_text() == CASE
        assert tab.input_value("#f-tol") == "0.05"


def test_the_plain_url_opens_a_page_that_says_how_to_log_in(browser: Any, tmp_path: Path) -> None:
    root = make_eval(tmp_path, CASE, video=KITCHEN, name="kitchen")
    with served(root) as server:
        server.state.login_file = "file:///tmp/glasskit-review-abc/login.html"
        context = browser.new_context(viewport={"width": 390, "height": 844})
        try:
            tab = context.new_page()
            response = tab.goto(server.url)
            assert response is not None and response.status == 401
            text = tab.inner_text("body")
            assert "Log in to this review server" in text
            assert "open the login file file:///tmp/glasskit-review-abc/login.html in this browser" in text
            assert "--no-open" in text
            width = tab.evaluate("document.documentElement.scrollWidth")
            assert width <= 390  # readable on a phone, no panning
        finally:
            context.close()
    assert Path(CHROMIUM).exists()
