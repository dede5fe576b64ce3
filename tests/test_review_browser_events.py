"""A stream target on the review page, in a real headless Chromium.

The eval is the stream end-to-end tests' scripted adapter on the 2 s constant-rate fixture, with
narrower windows and one quiet span, so a real run's report (``run --output-json``, in a
subprocess) has a known set of emissions: 2 hits, 1 repeat, 1 false alarm and 1 missed event.
The page must draw them with the events' windows and the quiet span, and adding, moving and
deleting events must write the case file through the checked writer: a refused edit (overlapping
windows) says where and writes nothing, undo restores, and ``validate`` passes on what was written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from evalkit import load_case
from reviewpage import REPO, Page, browser, opened, opened_at, served
from test_e2e_streams import SCRIPTED, K

from glasskit_eval.cases.model import Case

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

#: Onset frames 3, 10 and 16 at 10 fps; windows [at, at + 0.2]; quiet time [0, 0.25].
CASE = """\
video: cfr_h264.mp4
targets:
  pan:
    sample_defaults: {field: alert}
    stream: {window: [0, 0.2]}
    events:
      - at: 0.3   # the first boil
        expect: boiling
      - at: 1.0
        expect: boiling
      - at: 1.6
        expect: boiling
    quiet: [[0, 0.25]]
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    # In a subprocess: `run` starts its own event loop, and Playwright's runs in this thread.
    return subprocess.run([sys.executable, "-m", "glasskit_eval", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[tuple[Page, Path]]:
    from evalkit import make_eval

    root = make_eval(tmp_path, {"c": CASE}, adapter=SCRIPTED, videos=("cfr_h264.mp4",))
    (root / "adapter.yaml").write_text(json.dumps({"onsets": [3, 10, 16], "k": K, "spurious": [0, 9]}))
    report = tmp_path / "r.json"
    proc = _cli("run", "--eval-dir", str(root), "--output-json", str(report))
    assert proc.returncode == 0, proc.stderr
    with served(root, report=report) as server, opened(browser, server) as tab:
        yield tab, root / "cases" / "c.yaml"


def _row(page: Page) -> Any:
    return page.tab.locator(".tl-row[data-target='pan']")


def _count(page: Page, selector: str) -> int:
    return int(_row(page).locator(selector).count())


def _onsets(path: Path) -> list[Fraction]:
    case, problems = load_case(path)
    assert problems == [] and isinstance(case, Case)
    target = case.target("pan")
    assert target is not None and target.stream is not None
    return [e.at for e in target.stream.events]


def _validates(root: Path) -> None:
    proc = _cli("validate", "--eval-dir", str(root))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_events_and_emissions_are_drawn_and_edits_write_the_case(page: tuple[Page, Path]) -> None:
    tab, path = page
    t = tab.tab
    t.wait_for_selector(".tl-row[data-target='pan'] .tl-event")
    # Windows, onsets and the quiet span from the case file.
    assert (_count(tab, ".tl-window"), _count(tab, ".tl-event"), _count(tab, ".tl-quiet")) == (3, 3, 1)
    starts = _row(tab).locator(".tl-window").evaluate_all("ws => ws.map(w => [Number(w.dataset.start), Number(w.dataset.end)])")
    assert [[round(a, 6), round(b, 6)] for a, b in starts] == [[0.3, 0.5], [1.0, 1.2], [1.6, 1.8]]
    # The report's emissions, by class, where the run timed them; the miss at its onset.
    def times(kind: str) -> list[float]:
        return sorted(round(float(x), 6) for x in _row(tab).locator(f".tl-emission.{kind}").evaluate_all(
            "ms => ms.map(m => m.dataset.time)"))

    assert (times("hit"), times("repeat"), times("false_alarm"), times("missed")) == ([0.5, 1.2], [1.7], [0.0], [1.6])
    assert _count(tab, ".tl-emission.changed") == 0

    # Add an event at the playhead (0.7 s): written in time order, expecting what its neighbour does.
    tab.seek(0.7)
    t.click("#add-at")
    tab.saves(1)
    assert _onsets(path) == [Fraction(3, 10), Fraction(7, 10), Fraction(1), Fraction(8, 5)]
    assert "      - at: 0.7\n        expect: boiling\n      - at: 1.0\n" in path.read_text()
    assert _count(tab, ".tl-event") == 4 and _count(tab, ".tl-event.selected") == 1
    _validates(path.parent.parent)

    # A refused add: [0.9, 1.1] overlaps the window of the event at 1.0. Located, and nothing written.
    before = path.read_bytes()
    tab.seek(0.9)
    t.click("#add-at")
    tab.saves(1)
    notice = tab.notice()
    # Named by onset, as the page shows events, not by position.
    assert "Not saved" in notice and "targets.pan event @ 0.9s" in notice and "overlaps" in notice
    assert "events[" not in notice
    assert path.read_bytes() == before
    t.wait_for_function("document.querySelectorAll(\".tl-row[data-target='pan'] .tl-event\").length === 4")

    # Move the event at 1.0 to 1.3 by dragging its onset; its window follows, the run's hit goes stale.
    tick = _row(tab).locator(".tl-event[data-event='2']")
    tab.drag(tick, 0.3)
    tab.saves(2)
    assert _onsets(path) == [Fraction(3, 10), Fraction(7, 10), Fraction(13, 10), Fraction(8, 5)]
    assert "      - at: 0.3   # the first boil\n" in path.read_text()
    t.wait_for_selector(".tl-row[data-target='pan'] .tl-emission.hit.changed[data-time='1.2']")
    _validates(path.parent.parent)

    # Delete the event at 0.7: select its onset, press Delete.
    _row(tab).locator(".tl-event[data-event='1']").click()
    t.wait_for_selector(".tl-row[data-target='pan'] .tl-event.selected[data-event='1']")
    t.keyboard.press("Delete")
    tab.saves(3)
    assert _onsets(path) == [Fraction(3, 10), Fraction(13, 10), Fraction(8, 5)]
    _validates(path.parent.parent)

    # Undo puts it back, byte for byte as before the delete.
    t.keyboard.press("Control+z")
    tab.saves(4)
    assert _onsets(path) == [Fraction(3, 10), Fraction(7, 10), Fraction(13, 10), Fraction(8, 5)]
    assert _count(tab, ".tl-event") == 4
    assert tab.problems == []


def test_an_event_opens_in_the_inspector_and_each_field_saves_that_event_alone(page: tuple[Page, Path],
                                                                                 tmp_path: Path) -> None:
    tab, path = page
    t = tab.tab
    sent: list[tuple[str, Any]] = []
    t.on("request", lambda r: sent.append((r.method, json.loads(r.post_data or "null")))
         if r.method in ("PUT", "PATCH") else None)
    _row(tab).locator(".tl-event[data-event='1']").click()
    t.wait_for_selector("#event-form:not([hidden])")
    assert t.inner_text("#insp-where") == "pan · event @ 1s"
    assert t.input_value("#ev-at") == "1" and t.input_value("#ev-expect") == '"boiling"'
    assert t.is_hidden("#insp-form") and t.is_hidden("#insp-empty")
    # The run's verdict on this event: detected, with its latency.
    assert "detected @ 1.2s, latency 0.2s" in t.inner_text("#ev-results")
    tab.screenshot(tmp_path, "review-event-inspector")

    t.fill("#ev-comment", "the second boil")
    t.press("#ev-comment", "Tab")
    tab.saves(1)
    t.fill("#ev-win-end", "0.15")
    t.press("#ev-win-end", "Enter")
    tab.saves(2)
    t.fill("#ev-expect", '"steam"')
    t.press("#ev-expect", "Tab")
    tab.saves(3)
    assert ("      - at: 1.0\n        window: [0, 0.15]\n        expect: steam\n        comment: the second boil\n"
            in path.read_text())
    _validates(path.parent.parent)
    # Each save carried the one event, never the list.
    assert [m for m, _b in sent] == ["PATCH"] * 3
    assert all(set(b) == {"revision", "op", "index", "event"} and b["op"] == "set" and b["index"] == 1
               for _m, b in sent)

    # A refused change names the event by its onset and leaves the file as it was.
    before = path.read_bytes()
    t.fill("#ev-at", "0.35")
    t.press("#ev-at", "Enter")
    tab.saves(3)  # refused: no new save
    notice = tab.notice()
    assert "event @ 0.35s" in notice and "overlaps" in notice and "events[" not in notice
    assert path.read_bytes() == before
    t.wait_for_selector("#ev-at")
    assert t.input_value("#ev-at") == "1"
    assert tab.problems == []


def test_on_a_phone_the_video_and_timeline_fit_the_screen(browser: Any, tmp_path: Path) -> None:
    from evalkit import make_eval

    root = make_eval(tmp_path, {"c": CASE}, adapter=SCRIPTED, videos=("cfr_h264.mp4",))
    with served(root) as server, opened_at(browser, server, {"width": 390, "height": 844}) as tab:
        t = tab.tab
        sizes = t.evaluate("""() => ({page: document.documentElement.scrollWidth,
            video: document.getElementById('stage').getBoundingClientRect().width,
            timeline: document.getElementById('timeline').getBoundingClientRect().top})""")
        assert sizes["page"] <= 390, sizes  # no sideways scrolling
        assert sizes["video"] >= 300, sizes
        assert sizes["timeline"] < 844, sizes  # in view without scrolling
        t.screenshot(path=str(tmp_path / "review-phone.png"))
        # The event inspector is reachable below the timeline.
        _row(tab).locator(".tl-event[data-event='0']").click()
        t.wait_for_selector("#event-form:not([hidden])")
        assert t.evaluate("document.documentElement.scrollWidth") <= 390
        assert tab.problems == []
