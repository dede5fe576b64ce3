"""Saving one event of a long list on the review page, in a real headless Chromium.

A target of 3,000 events: adding, editing and deleting an event, and undoing and redoing each,
must write the file as before (checked on disk after every step) while the wire carries the one
event both ways: the page's request holds the edit, the server's answer the edit as written,
never the list. Undo writes the file back byte for byte (a hand-written event's comment too). Undo
and redo of event edits also work after a merge with a change made on disk, and stop at a
conflict; a refused edit names the event by its onset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evalkit import load_case
from reviewpage import Page, browser, make_eval, opened, served

from glasskit_eval.cases.model import Case

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

#: 1,500 events either side of an empty second in the middle of the 2 s, 10 fps clip.
COUNT = 1500


def case_text() -> str:
    lines = ["# a long stream", "video: cfr_h264.mp4", "targets:", "  door:", "    samples:", "      - at: 0.5",
             "        expect: closed", "  pan:", "    stream: {window: [0, 0.0001]}", "    events:"]
    for i in range(COUNT):
        lines += [f"      - at: {i * 0.0003:.7f}" + ("   # the first" if i == 0 else ""), "        expect: x"]
    for i in range(COUNT):
        lines += [f"      - at: {1.2 + i * 0.0003:.7f}", "        expect: x"]
    return "\n".join(lines) + "\n"


class Wire:
    """The page's event writes (PATCH) and their answers, as Chromium saw them."""

    def __init__(self, tab: Any) -> None:
        self.requests: list[Any] = []
        self.responses: list[Any] = []
        tab.on("request", lambda r: self.requests.append(r) if r.method == "PATCH" else None)
        tab.on("response", lambda r: self.responses.append(r) if r.request.method == "PATCH" else None)

    def last(self) -> tuple[dict[str, Any], bytes]:
        return json.loads(self.requests[-1].post_data), self.responses[-1].body()


@pytest.fixture
def long_list(browser: Any, tmp_path: Path) -> Iterator[tuple[Page, Path]]:
    root = make_eval(tmp_path, case_text())
    with served(root) as server, opened(browser, server) as page:
        yield page, root / "cases" / "clip.yaml"
        assert page.problems == []


def _onsets(path: Path) -> list[float]:
    case, problems = load_case(path)
    assert problems == [] and isinstance(case, Case)
    target = case.target("pan")
    assert target is not None and target.stream is not None
    return [float(e.at) for e in target.stream.events]


def _small(wire: Wire, op: str) -> dict[str, Any]:
    """The last write carried one event, and its answer no list: what the page was sent back."""
    sent, body = wire.last()
    assert sent["op"] == op and "events" not in sent and len(json.dumps(sent)) < 600
    assert len(body) < 1000 and b'"targets"' not in body and b'"events"' not in body
    answer: dict[str, Any] = json.loads(body)
    return answer


def _select_first(page: Page) -> None:
    """Select the first event by keyboard (its drawn neighbours lie over it at this zoom)."""
    page.tab.locator(".tl-row[data-target='pan'] .tl-event[data-event='0']").focus()
    page.tab.keyboard.press("Enter")
    page.tab.wait_for_selector("#event-form:not([hidden])")
    assert page.tab.inner_text("#insp-where") == "pan · event @ 0s"


def _shows(page: Page, path: Path) -> None:
    """The page's copy of the file (its source panel) is the file on disk, byte for byte."""
    page.tab.wait_for_function("text => document.getElementById('source').textContent === text",
                               arg=path.read_text())


def test_event_edits_and_their_undo_and_redo_send_one_event(long_list: tuple[Page, Path], tmp_path: Path) -> None:
    page, path = long_list
    t = page.tab
    wire = Wire(t)
    original = path.read_text()
    page.focus_target("pan")

    # Add at 0.8 s, in the empty second: index 1500, expecting what its neighbour does.
    page.seek(0.8)
    t.click("#add-at")
    page.saves(1)
    added = path.read_text()
    assert "      - at: 0.4497000\n        expect: x\n      - at: 0.8\n        expect: x\n      - at: 1.2000000\n" in added
    assert _small(wire, "add")["edit"] == {"target": "pan", "op": "add", "index": COUNT, "event": {"at": 0.8, "expect": "x"}}
    t.wait_for_selector("#event-form:not([hidden])")
    assert t.inner_text("#insp-where") == "pan · event @ 0.8s"
    _shows(page, path)
    page.screenshot(tmp_path, "eventsave-1-added")

    # Edit it in the inspector: one set.
    t.fill("#ev-comment", "added here")
    t.press("#ev-comment", "Tab")
    page.saves(2)
    commented = path.read_text()
    assert "      - at: 0.8\n        expect: x\n        comment: added here\n" in commented
    assert _small(wire, "set")["edit"]["event"] == {"at": 0.8, "expect": "x", "comment": "added here"}
    page.screenshot(tmp_path, "eventsave-2-commented")

    # Delete it (it is selected): the file is the original again.
    t.keyboard.press("Delete")
    page.saves(3)
    assert path.read_text() == original
    assert _small(wire, "delete")["edit"]["event"] is None
    assert t.is_hidden("#event-form")
    _shows(page, path)
    page.screenshot(tmp_path, "eventsave-3-deleted")

    # Undo each, then redo each: the inverse edits, each one event, each onto the exact state.
    for n, (state, op) in enumerate([(commented, "add"), (added, "set"), (original, "delete")], start=4):
        t.keyboard.press("Control+z")
        page.saves(n)
        assert path.read_text() == state, f"undo {n - 3}"
        assert _small(wire, op) and wire.last()[0]["merge"] is False
        _shows(page, path)
        page.screenshot(tmp_path, f"eventsave-{n}-undone")
    t.wait_for_selector("#notice-text:has-text('Undid: add event at 0.8 s')")
    for n, (state, op) in enumerate([(added, "add"), (commented, "set"), (original, "delete")], start=7):
        t.keyboard.press("Control+Shift+z")
        page.saves(n)
        assert path.read_text() == state, f"redo {n - 6}"
        assert _small(wire, op)
    assert len(_onsets(path)) == 2 * COUNT
    _shows(page, path)
    assert t.is_disabled("#redo") and not t.is_disabled("#undo")

    # A hand-written event: its comment and spelling outside the edited key stay, and undo puts it back.
    page.seek(0)
    _select_first(page)
    t.wait_for_selector("#event-form:not([hidden])")
    t.fill("#ev-expect", '"y"')
    t.press("#ev-expect", "Tab")
    page.saves(10)
    assert path.read_text() == original.replace("at: 0.0000000   # the first\n        expect: x",
                                                "at: 0.0000000   # the first\n        expect: y")
    page.screenshot(tmp_path, "eventsave-10-first-edited")
    t.keyboard.press("Control+z")
    page.saves(11)
    assert path.read_text() == original
    # Deleted, its comment goes with it; undo brings it back byte for byte, comment and spelling too.
    _select_first(page)
    t.keyboard.press("Delete")
    page.saves(12)
    assert "# the first" not in path.read_text()
    t.keyboard.press("Control+z")
    page.saves(13)
    assert path.read_text() == original
    sent, _body = wire.last()
    assert sent["op"] == "add" and "0   # the first\n" in sent["source_edit"]["text"]
    _shows(page, path)
    page.screenshot(tmp_path, "eventsave-13-first-back")


def test_undo_after_a_merge_keeps_the_change_on_disk_and_stops_at_a_conflict(long_list: tuple[Page, Path],
                                                                             tmp_path: Path) -> None:
    page, path = long_list
    t = page.tab
    wire = Wire(t)
    original = path.read_text()
    page.focus_target("pan")
    # Someone edits another target on disk; the page's add is merged onto that file.
    elsewhere = original.replace("expect: closed", "expect: open")
    path.write_text(elsewhere)
    page.seek(0.8)
    t.click("#add-at")
    page.saves(1)
    assert "Saved. The file had changed on disk elsewhere" in page.notice()
    merged = path.read_text()
    assert "expect: open" in merged and "      - at: 0.8\n        expect: x\n" in merged
    answer = json.loads(wire.last()[1])
    assert answer["saved"]["merged"] is True and answer["case"]["source"] == merged  # the page redraws the file
    _shows(page, path)
    # Undo goes back to the file as it was on disk, the change made there kept.
    t.keyboard.press("Control+z")
    page.saves(2)
    assert path.read_text() == elsewhere
    _shows(page, path)
    # Redo, then a change on disk again: the undo is a conflict and writes nothing.
    t.keyboard.press("Control+Shift+z")
    page.saves(3)
    assert path.read_text() == merged
    changed = merged.replace("# a long stream", "# a long stream (edited elsewhere)")
    path.write_text(changed)
    t.keyboard.press("Control+z")
    t.wait_for_selector("#banner.conflict:not([hidden])")
    assert "changed on disk" in t.inner_text("#banner") and "the undo was not written" in t.inner_text("#banner")
    assert t.inner_text("#save-status") == "Conflict" and path.read_text() == changed
    page.screenshot(tmp_path, "eventsave-conflict")


def test_a_refused_event_edit_names_the_event_and_the_page_keeps_the_file(long_list: tuple[Page, Path],
                                                                          tmp_path: Path) -> None:
    page, path = long_list
    t = page.tab
    before = path.read_bytes()
    page.focus_target("pan")
    page.seek(0)
    _select_first(page)
    t.wait_for_selector("#event-form:not([hidden])")
    # Onto the window of the next event (0.0003 s): refused, named by its onset, nothing written.
    t.fill("#ev-at", "0.00025")
    t.press("#ev-at", "Enter")
    notice = page.notice()
    assert "Not saved" in notice and "targets.pan event @ 0.00025s" in notice and "overlaps" in notice
    assert "events[" not in notice and path.read_bytes() == before
    t.wait_for_function("document.getElementById('ev-at').value === '0'")
    assert t.is_disabled("#undo")
    _shows(page, path)
    page.screenshot(tmp_path, "eventsave-refused")


PURE = """async () => {
  const s = await import("/static/eventsync.js");
  const detail = () => ({
    revision: "r0", source: "a: 😀\\nevents: [x]\\n", status: "ready",
    targets: [{ id: "pan", stream: { window: [0, 0.5], events: [{ raw: { at: 1 } }, { raw: { at: 2, comment: "c" } }] } }],
    emissions: [{ target: "pan", kind: "hit", event: 1, at: 2, window: [2, 2.5] },
                { target: "pan", kind: "missed", event: 0, at: 1, window: [1, 1.5] },
                { target: "pan", kind: "repeat", time_s: 3 }],
  });
  const d = detail();
  const inverses = ["add", "set", "delete"].map((op) => s.inverseOf("pan", { op, index: 1, event: { at: 9 } }, d));
  // An add before both events: the text after the emoji (two UTF-16 units) changes; both marks go stale.
  const added = s.confirmEvent(d, { revision: "r1", summary: { status: "drafts" }, edit: { target: "pan", op: "add", index: 0, event: { at: 0.5 } },
    source_edit: { start: 14, end: 17, text: "[y, x]", old: "[x]" } });
  const afterAdd = { source: added.source, revision: added.revision, status: added.status,
    events: added.targets[0].stream.events.map((e) => e.raw.at), changed: added.emissions.map((m) => m.changed ?? null) };
  // Deleting it again: both marks are what the run scored again.
  s.confirmEvent(d, { revision: "r2", summary: {}, edit: { target: "pan", op: "delete", index: 0, event: null }, source_edit: null });
  const afterDelete = d.emissions.map((m) => m.changed ?? null);
  const merged = s.confirmEvent(d, { case: { revision: "whole" }, edit: { target: "pan", op: "set", index: 0, event: {} } });
  // A step undone onto another revision than it recorded: it and its neighbour move there, their texts go.
  const step = { event: {}, before: { revision: "A" }, forwardText: {}, inverseText: {} };
  const below = { before: { revision: "Z", text: "z" }, after: { revision: "A", text: "a" } };
  s.reanchor(step, "before", below, "after", { revision: "A2", source: "a2" });
  const same = { event: {}, before: { revision: "A" }, forwardText: { t: 1 }, inverseText: { t: 2 } };
  s.reanchor(same, "before", null, "after", { revision: "A", source: "a" });
  return { inverses, afterAdd, afterDelete, merged: merged.revision, step, below, same };
}"""


def test_the_answer_is_applied_to_the_pages_copy_of_the_case(long_list: tuple[Page, Path]) -> None:
    got = long_list[0].tab.evaluate(PURE)
    assert got["inverses"] == [{"op": "delete", "index": 1}, {"op": "set", "index": 1, "event": {"at": 2, "comment": "c"}},
                               {"op": "add", "index": 1, "event": {"at": 2, "comment": "c"}}]
    assert got["afterAdd"] == {"source": "a: 😀\nevents: [y, x]\n", "revision": "r1", "status": "drafts",
                               "events": [0.5, 1, 2], "changed": [True, True, None]}
    assert got["afterDelete"] == [False, False, None]
    assert got["merged"] == "whole"
    assert got["step"] == {"event": {}, "before": {"revision": "A2"}, "forwardText": None, "inverseText": None}
    assert got["below"] == {"before": {"revision": "Z", "text": "z"}, "after": {"revision": "A2", "text": "a2"}}
    assert got["same"]["forwardText"] == {"t": 1} and got["same"]["before"] == {"revision": "A"}
