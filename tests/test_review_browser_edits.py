"""Editing on the review page, in a real headless Chromium: every edit acts on what is selected,
can be undone byte for byte, and is never written when `validate` would refuse the file.

The case uses the demo's kitchen clip (4 s, 10 fps; the lights come on at 2.0 s) and, where a
report is needed, a real `run` of the demo adapter over it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from reviewpage import DEMO, Page, browser, make_eval, opened, run_report, served

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

KITCHEN = DEMO / "cases" / "kitchen.mp4"
CASE = """\
# Kitchen, labelled by hand: every comment here must survive the page's edits.
video: kitchen.mp4
sampling:
  every_s: 0.5
targets:
  lights_on:
    label: Lights on
    sample_defaults:
      field: lights_on
    samples:
      - range: [0.0, 2.0]   # dark
        expect: false
        comment: Dark room before the switch.
      - range: [2.0, 4.0]
        expect: false
  brightness:
    samples:
      - at: [0.5, 3.5]   # two looks
        field: brightness
        expect: 0.12
        compare: {mode: numeric, tolerance: 0.05}
  door:
    samples:
      - at: [1.0, 3.0]   # two looks
        expect: false
        comment: checked twice
  switch:
    samples:
      - at: 2.0
        expect: flipped
"""


class Review:
    def __init__(self, page: Page, path: Path) -> None:
        self.page = page
        self.tab = page.tab
        self.path = path

    def text(self) -> str:
        return self.path.read_bytes().decode("utf-8")


@contextmanager
def kitchen(browser: Any, tmp_path: Path, case: str = CASE, *, report: bool = False) -> Iterator[Review]:
    root = make_eval(tmp_path, case, video=KITCHEN, name="kitchen", adapter=report)
    options: dict[str, Any] = {"report": run_report(root, tmp_path / "results.json")} if report else {}
    with served(root, **options) as server, opened(browser, server) as page:
        page.frame(0)
        yield Review(page, root / "cases" / "kitchen.yaml")
        assert page.problems == []


@pytest.fixture
def review(browser: Any, tmp_path: Path) -> Iterator[Review]:
    with kitchen(browser, tmp_path) as opened_review:
        yield opened_review


@pytest.fixture
def reported(browser: Any, tmp_path: Path) -> Iterator[Review]:
    """The page over a real report of the demo adapter: 8 failures (door 1.0 and 3.0, lights
    2.0-3.5, switch 2.0, brightness 3.5): the adapter answers a mapping, and the lights are on."""
    with kitchen(browser, tmp_path, report=True) as opened_review:
        yield opened_review


def test_delete_one_tick_keeps_the_other(review: Review) -> None:
    page = review.page
    page.select_tick("brightness", 3.5)
    page.press("Delete")
    page.saves(1)
    assert review.text() == CASE.replace("at: [0.5, 3.5]   # two looks", "at: 0.5   # two looks")
    review.tab.wait_for_selector(".tl-row[data-target='brightness'] .tl-at[data-time='0.5']")
    assert review.tab.locator(".tl-row[data-target='brightness'] .tl-at").count() == 1


def test_y_n_on_an_at_tick_changes_that_timestamp_only(review: Review) -> None:
    page = review.page
    page.select_tick("door", 3.0)
    page.press("y")
    page.saves(1)
    assert review.text() == CASE.replace(
        "      - at: [1.0, 3.0]   # two looks\n        expect: false\n        comment: checked twice\n",
        "      - at: 1.0   # two looks\n        expect: false\n        comment: checked twice\n"
        "      - at: 3.0\n        expect: true\n")
    # The new block is selected: the next key acts on the same timestamp, not on 1.0.
    review.tab.wait_for_selector(".tl-row[data-target='door'] .tl-at.selected[data-time='3']")
    page.press("n")
    page.saves(2)
    assert review.text() == CASE.replace(
        "      - at: [1.0, 3.0]   # two looks\n        expect: false\n        comment: checked twice\n",
        "      - at: 1.0   # two looks\n        expect: false\n        comment: checked twice\n"
        "      - at: 3.0\n        expect: false\n")


def test_y_on_a_range_asks_first_then_sets_every_sample(review: Review) -> None:
    page, tab = review.page, review.tab
    page.press("]")  # to 0.5 s, inside the first range
    page.frame(5)
    page.press("y")
    tab.wait_for_selector("#prompt:not([hidden])")
    assert "Y sets 4 samples of this range [0, 2) to true." in tab.inner_text("#prompt")
    assert page.saves_now() == 0 and review.text() == CASE  # nothing yet
    page.press("Escape")
    tab.wait_for_selector("#prompt", state="hidden")
    page.press("y", "y")
    page.saves(1)
    assert review.text() == CASE.replace("      - range: [0.0, 2.0]   # dark\n        expect: false",
                                         "      - range: [0.0, 2.0]   # dark\n        expect: true")


ONE_RANGE = CASE.replace("      - range: [0.0, 2.0]   # dark\n", "      - range: [0.0, 4.0]   # dark\n").replace(
    "      - range: [2.0, 4.0]\n        expect: false\n", "")


def test_split_here_labels_a_state_change_in_two_keys(browser: Any, tmp_path: Path) -> None:
    # The lights come on at 2.0 s; the labeller marks them on from 1.5 s in a range [0, 4) of false.
    with kitchen(browser, tmp_path, ONE_RANGE) as review:
        page, tab = review.page, review.tab
        page.press("]", "]", "]")  # 1.5 s
        page.frame(15)
        page.press("y")
        assert "Y sets 8 samples of this range [0, 4) to true." in tab.inner_text("#prompt")
        assert "S splits the range at the playhead (1.5 s)" in tab.inner_text("#prompt")
        page.press("s")
        page.saves(1)
        assert review.text() == ONE_RANGE.replace(
            "      - range: [0.0, 4.0]   # dark\n        expect: false\n        comment: Dark room before the switch.\n",
            "      - range: [0.0, 1.5]   # dark\n        expect: false\n        comment: Dark room before the switch.\n"
            "      - range: [1.5, 4.0]\n        expect: true\n")
        tab.wait_for_selector(".tl-row[data-target='lights_on'] .tl-range.selected[data-block='1']")
        page.screenshot(tmp_path, "after-split")
        # S alone splits without changing values.
        page.press("]", "]")  # 2.5 s, in [1.5, 4.0)
        page.frame(25)
        page.press("s")
        page.saves(2)
        assert "      - range: [1.5, 2.5]\n        expect: true\n      - range: [2.5, 4.0]\n        expect: true\n" in review.text()


def test_undo_and_redo_restore_the_exact_bytes_of_every_edit_kind(review: Review, tmp_path: Path) -> None:
    page, tab = review.page, review.tab
    states = [review.path.read_bytes()]

    def saved() -> None:
        page.saves(len(states))
        states.append(review.path.read_bytes())
        assert states[-1] != states[-2]

    page.select_tick("door", 3.0)
    page.press("y")  # 1: Y on a tick of an at list (split off)
    saved()
    page.select_range("lights_on", 0)
    page.press("y", "y")  # 2: a whole range, after the question
    saved()
    page.seek(1.5)
    page.press("s")  # 3: split a range
    saved()
    page.focus_target("brightness")
    page.seek(3.0)
    page.press("a")  # 4: add a sample
    saved()
    tab.fill("#f-comment", "added in review")
    tab.press("#f-comment", "Tab")  # 5: an inspector field, committed when the focus leaves it
    saved()
    page.focus_target("door")
    page.seek(2.0)
    page.press("r")  # 6: add a range
    saved()
    page.drag(page.tick("door", 1.0), 0.2)  # 7: drag a timestamp
    saved()
    page.select_tick("brightness", 0.5)
    page.press("Delete")  # 8: delete a block
    saved()
    page.drag(page.range_handle("lights_on", 1, "start"), 0.2)  # 9: a shared boundary, both ranges
    saved()
    assert "range: [0.0, 1.7]" in review.text() and "range: [1.7, 2.0]" in review.text()
    assert len(set(states)) == len(states) == 10

    # Undo every step: each one gives back the exact bytes before it.
    for n, expected in enumerate(reversed(states[:-1]), start=1):
        page.press("Control+z")
        page.saves(9 + n)
        assert review.path.read_bytes() == expected
    assert review.path.read_bytes() == CASE.encode()
    page.screenshot(tmp_path, "after-undo")
    page.press("Control+z")
    tab.wait_for_selector("#notice-text:has-text('Nothing to undo')")
    # Redo every step, with the other shortcut and with the button.
    for n, expected in enumerate(states[1:], start=1):
        if n % 2:
            page.press("Control+Shift+z")
        else:
            tab.click("#redo")
        page.saves(18 + n)
        assert review.path.read_bytes() == expected
    assert tab.is_disabled("#redo") and not tab.is_disabled("#undo")
    tab.click("#undo")
    page.saves(28)
    assert review.path.read_bytes() == states[-2]


def test_undo_of_an_edit_whose_file_changed_is_a_conflict(review: Review) -> None:
    page, tab = review.page, review.tab
    page.select_tick("door", 1.0)
    page.press("y")
    page.saves(1)
    changed = review.text().replace("# Kitchen", "# Kitchen (edited elsewhere)")
    review.path.write_text(changed)
    page.press("Control+z")
    tab.wait_for_selector("#banner.conflict:not([hidden])")
    assert "changed on disk" in tab.inner_text("#banner") and "the undo was not written" in tab.inner_text("#banner")
    assert review.text() == changed
    assert tab.inner_text("#save-status") == "Conflict"


def test_a_refused_edit_leaves_bytes_and_page_unchanged(review: Review, tmp_path: Path) -> None:
    page, tab = review.page, review.tab
    page.select_tick("door", 1.0)
    before_source = tab.inner_text("#source")
    tab.fill("#f-at", "5")  # past the end of the 4 s clip: validate would refuse it
    tab.press("#f-at", "Enter")
    message = page.notice()
    assert "Not saved: targets.door.samples[0]: sample time 5.0s is past the end of the video kitchen.mp4" in message
    assert review.text() == CASE
    # The page is drawn from the file again, and says it once.
    assert tab.input_value("#f-at") == "1, 3"
    tab.wait_for_selector(".tl-row[data-target='door'] .tl-at[data-time='1']")
    assert tab.inner_text("#source") == before_source
    assert page.body_text().count("past the end of the video") == 1
    assert tab.inner_text("#save-status") == "Not saved"
    page.screenshot(tmp_path, "after-refused-edit")
    assert tab.is_disabled("#undo")  # nothing was recorded


def test_deleting_the_last_sample_asks_remove_target_or_keep_as_draft(review: Review) -> None:
    page, tab = review.page, review.tab
    page.select_tick("switch", 2.0)
    page.press("Delete")
    tab.wait_for_selector("#last-sample[open]")
    assert "switch" in tab.inner_text("#last-sample")
    assert review.text() == CASE  # nothing is written before the answer
    tab.click("#last-draft")
    page.saves(1)
    assert review.text() == CASE.replace("      - at: 2.0\n        expect: flipped\n", "      - at: 2.0\n")
    tab.wait_for_selector("#case-list .badge.drafts:has-text('1 draft')")
    page.select_tick("switch", 2.0)
    page.press("Delete")
    tab.wait_for_selector("#last-sample[open]")
    tab.click("#last-remove")
    page.saves(2)
    assert review.text() == CASE.split("  switch:\n")[0]
    tab.wait_for_selector(".tl-row[data-target='switch']", state="detached")
    page.press("Control+z")
    page.saves(3)
    assert review.text() == CASE.replace("      - at: 2.0\n        expect: flipped\n", "      - at: 2.0\n")
    page.press("Control+z")
    page.saves(4)
    assert review.text() == CASE


def test_dragging_a_shared_boundary_moves_both_ranges(review: Review) -> None:
    page, tab = review.page, review.tab
    page.drag(page.range_handle("lights_on", 0, "end"), -0.5)  # the boundary 2.0 -> 1.5: both ranges
    page.saves(1)
    assert review.text() == CASE.replace("range: [0.0, 2.0]", "range: [0.0, 1.5]").replace(
        "range: [2.0, 4.0]", "range: [1.5, 4.0]")
    page.drag(page.range_handle("lights_on", 1, "start"), 0.3, alt=True)  # Alt: one edge, a gap opens
    page.saves(2)
    assert review.text() == CASE.replace("range: [0.0, 2.0]", "range: [0.0, 1.5]").replace(
        "range: [2.0, 4.0]", "range: [1.8, 4.0]")
    # An end dragged into the next range stops at it (the ranges touch) instead of being refused.
    page.drag(page.range_handle("lights_on", 0, "end"), 1.0)
    page.saves(3)
    assert review.text() == CASE.replace("range: [0.0, 2.0]", "range: [0.0, 1.8]").replace(
        "range: [2.0, 4.0]", "range: [1.8, 4.0]")
    # A whole range moved into its neighbour stops at it too.
    page.drag(page.range_bar("lights_on", 1), -1.0)
    assert page.saves_now() == 3  # it already touches: nothing to write
    assert tab.is_hidden("#notice")
    assert page.body_text().count("overlap") == 0


def test_f_jumps_between_failures_of_the_report(reported: Review) -> None:
    page, tab = reported.page, reported.tab
    assert "report: 5 passed · 8 failed · 0 errors" in tab.inner_text("#report-badge")
    stops = []
    for _ in range(8):
        page.press("f")
        tab.wait_for_selector("#insp-where:not(:empty)")
        tab.wait_for_selector("#frame-label:not(.stale)")
        stops.append((tab.inner_text("#crumb-target"), tab.get_attribute("#frame-label", "data-index")))
    assert stops == [("door", "10"), ("Lights on", "20"), ("switch", "20"), ("Lights on", "25"),
                     ("Lights on", "30"), ("door", "30"), ("Lights on", "35"), ("brightness", "35")]
    page.press("f")
    assert "No later failure" in page.notice()
    page.press("Shift+F")
    tab.wait_for_selector("#crumb-target:has-text('Lights on')")
    page.frame(35)


def test_use_observed_and_the_full_observation(reported: Review) -> None:
    review = reported
    page, tab = review.page, review.tab
    page.select_tick("door", 1.0)
    full = tab.inner_text("#observed-json")
    assert full == '{\n  "brightness": 0.1,\n  "frame": 10,\n  "lights_on": false\n}'
    assert tab.evaluate("getComputedStyle(document.querySelector('#observed-json')).overflowY") == "auto"
    page.select_tick("brightness", 3.5)
    assert tab.inner_text("#observed-value") == "0.72"
    assert "failed" in tab.inner_text("#insp-results")
    tab.click("#use-observed")
    page.saves(1)
    assert review.text() == CASE.replace(
        "      - at: [0.5, 3.5]   # two looks\n        field: brightness\n        expect: 0.12\n"
        "        compare: {mode: numeric, tolerance: 0.05}\n",
        "      - at: 0.5   # two looks\n        field: brightness\n        expect: 0.12\n"
        "        compare: {mode: numeric, tolerance: 0.05}\n"
        "      - at: 3.5\n        field: brightness\n        compare: {mode: numeric, tolerance: 0.05}\n"
        "        expect: 0.72\n")
    # The run's verdict no longer applies: the marker says so instead of "failed".
    tab.wait_for_selector(".tl-row[data-target='brightness'] .tl-marker.changed[data-time='3.5']")
    assert "changed since run" in tab.inner_text("#insp-results")
    assert "1 changed since run" in tab.inner_text("#report-badge")
    # The same with the key, on a range: it asks first like Y/N.
    page.press("Home", "f")  # door 1.0 is the first failure; then lights_on 2.0
    page.press("f")
    page.frame(20)
    page.press("o")
    assert "O sets 4 samples of this range [2, 4) to true." in tab.inner_text("#prompt")
    page.press("o")
    page.saves(2)
    assert "      - range: [2.0, 4.0]\n        expect: true\n" in review.text()
    assert tab.locator(".tl-row[data-target='lights_on'] .tl-marker.failed").count() == 0
    page.press("Control+z", "Control+z")
    page.saves(4)
    assert review.text() == CASE


def test_a_hundred_steps_of_history(review: Review) -> None:
    page = review.page
    page.select_tick("door", 1.0)
    for i in range(105):
        page.press("y" if i % 2 == 0 else "n")
    page.saves(105)
    assert "expect: true" in review.text()
    assert review.tab.get_attribute("#undo", "data-steps") == "105"
    for _ in range(105):
        page.press("Control+z")
    page.saves(210)
    assert review.text() == CASE


def test_ctrl_z_in_a_text_box_undoes_typing_first_then_the_page(review: Review) -> None:
    page, tab = review.page, review.tab
    page.select_tick("switch", 2.0)
    tab.click("#f-string")
    tab.keyboard.type("X")
    page.press("Control+z")  # the browser's own undo: the typing goes, nothing is written
    assert tab.input_value("#f-string") == "flipped"
    assert page.saves_now() == 0 and tab.is_disabled("#undo")
    tab.keyboard.type("Y")
    page.press("Enter")  # committed: one edit
    page.saves(1)
    assert "expect: flippedY" in review.text()
    tab.click("#f-string")
    page.press("Control+z")  # nothing typed since the commit: the page's undo
    page.saves(2)
    assert review.text() == CASE and tab.input_value("#f-string") == "flipped"
    # A number box with nothing typed: Ctrl+Z is the page's, and never blanks the box or saves.
    page.select_range("lights_on", 0)
    tab.click("#f-start")
    page.press("Control+Shift+z")  # redo the edit above
    page.saves(3)
    page.press("Control+z")
    page.saves(4)
    page.press("Control+z")
    tab.wait_for_selector("#notice-text:has-text('Nothing to undo')")
    assert review.text() == CASE and tab.input_value("#f-start") == "0"


PURE = """async () => {
  const e = await import("/static/edits.js");
  const { History, HISTORY_LIMIT } = await import("/static/history.js");
  const r = (a, b, x = {}) => ({ range: [a, b], expect: false, ...x });
  const two = [r(0, 2, { comment: "c" }), r(2, 4)];
  const history = new History();
  for (let i = 0; i < 250; i++) history.record({ label: String(i) });
  return {
    both: e.dragEdge(two, 0, "end", 1.5).blocks.map((b) => b.range),
    bothClamped: e.dragEdge(two, 1, "start", 9).blocks.map((b) => b.range),
    aloneRight: e.dragEdge(two, 0, "end", 2.5, { alone: true }).blocks.map((b) => b.range),
    aloneLeft: e.dragEdge(two, 1, "start", 1.2, { alone: true }).blocks.map((b) => b.range),
    snapEnd: e.dragEdge([r(0, 1), r(2, 4)], 0, "end", 3).blocks.map((b) => b.range),
    snapStart: e.dragEdge([{ at: 1.5, expect: 1 }, r(2, 4)], 1, "start", 0.5, { frameAfter: (t) => t + 0.1 }).blocks[1].range,
    moveStops: e.moveRange([r(0, 1), r(2, 3)], 1, 0.2).blocks[1].range,
    moveEnd: e.moveRange([r(0, 1)], 0, 3.5, { duration: 4 }).blocks[0].range,
    split: e.splitRange(two, 0, 0.5, true).blocks,
    splitOutside: e.splitRange(two, 0, 2).error || null,
    tick: e.setTickValue([{ at: [1, 2, 3], expect: "x", comment: "c" }], 0, 1, true).blocks,
    deleteTick: e.deleteSelected([{ at: [1, 2] }], 0, 0).blocks,
    deleteLast: e.deleteSelected([{ at: 1 }], 0, 0).emptied,
    draft: e.keepAsDraft([{ at: 1, expect: 2, comment: "c" }], 0).blocks,
    steps: history.undoSteps.length, limit: HISTORY_LIMIT, oldest: history.undoSteps[0].label,
    untouched: JSON.stringify(two),
    tickOut: [0.5, 1.9, 1.1, 4.5].map((t) => e.clearOfRanges([{ at: 0 }, r(1, 2), r(4, 6)], 0, t, (x) => x - 0.1)),
  };
}"""


def test_edit_functions(review: Review) -> None:
    got = review.tab.evaluate(PURE)
    assert got["both"] == [[0, 1.5], [1.5, 4]]
    assert got["bothClamped"] == [[0, 3.999], [3.999, 4]]  # a range never shrinks to nothing
    assert got["aloneRight"] == [[0, 2], [2.5, 4]]
    assert got["aloneLeft"] == [[0, 1.2], [2, 4]]
    assert got["snapEnd"] == [[0, 2], [2, 4]]
    assert got["snapStart"] == [1.6, 4]  # a range may not start on a timestamp of the target
    assert got["moveStops"] == [1, 2] and got["moveEnd"] == [3, 4]
    assert got["split"] == [{"range": [0, 0.5], "expect": False, "comment": "c"},
                            {"range": [0.5, 2], "expect": True}, {"range": [2, 4], "expect": False}]
    assert "inside the range" in got["splitOutside"]
    assert got["tick"] == [{"at": [1, 3], "expect": "x", "comment": "c"}, {"at": 2, "expect": True}]
    assert got["deleteTick"] == [{"at": 2}] and got["deleteLast"] is True
    assert got["draft"] == [{"at": 1, "comment": "c"}]
    assert got["limit"] >= 100 and got["steps"] == got["limit"] and got["oldest"] == str(250 - got["limit"])
    assert got["tickOut"] == [0.5, 2, 0.9, 3.9]  # out of the ranges, at the nearer side
    assert got["untouched"] == '[{"range":[0,2],"expect":false,"comment":"c"},{"range":[2,4],"expect":false}]'
