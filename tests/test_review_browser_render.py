"""Drawing a long stream target on the review page, in a real headless Chromium.

Opening a case draws its timeline once (the timeline counts its drawings in ``data-draws``), not
again for the frame times, the first selection or the rows making the timeline taller; and a
target of 3,000 events still shows its events (the ones in view, a few pixels apart), selects one
by click and by keyboard, and draws the ones a zoomed-in timeline scrolls to, on a desktop screen
and on a phone's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from reviewpage import Page, browser, make_eval, opened_at, served

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

#: 1,500 events either side of an empty second in the middle of the 2 s, 10 fps clip.
COUNT = 1500
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


def case_text() -> str:
    lines = ["video: cfr_h264.mp4", "targets:", "  door:", "    samples:", "      - at: 0.5", "        expect: closed",
             "  pan:", "    stream: {window: [0, 0.0001]}", "    events:"]
    for i in range(COUNT):
        lines += [f"      - at: {i * 0.0003:.7f}", "        expect: x"]
    for i in range(COUNT):
        lines += [f"      - at: {1.2 + i * 0.0003:.7f}", "        expect: x"]
    return "\n".join(lines) + "\n"


def _settled_draws(page: Page) -> int:
    """The timeline's drawings so far, once two frames have passed (resize observers have run)."""
    draws = page.tab.evaluate("""() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(
        () => done(document.getElementById('timeline').dataset.draws))))""")
    return int(draws or 0)


def _screenshot(page: Page, tmp_path: Path, name: str, viewport: dict[str, int]) -> None:
    folder = Path(os.environ.get("GLASSKIT_REVIEW_SCREENS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.tab.screenshot(path=str(path))
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "screenshot looks blank"
        assert image.size == (viewport["width"], viewport["height"])


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_case_opens_with_one_drawing_and_its_events_select(browser: Any, tmp_path: Path,
                                                             viewport: dict[str, int]) -> None:
    root = make_eval(tmp_path, case_text())
    name = "desktop" if viewport is DESKTOP else "phone"
    with served(root) as server, opened_at(browser, server, viewport) as page:
        t = page.tab
        assert _settled_draws(page) == 1
        ticks = t.locator(".tl-row[data-target='pan'] .tl-event")
        shown = ticks.count()
        # The events in view, a few pixels apart: some of each half, far fewer than all.
        assert 10 < shown < COUNT, shown
        times = [float(x) for x in ticks.evaluate_all("nodes => nodes.map((n) => n.dataset.time)")]
        assert min(times) < 0.5 and max(times) > 1.2
        assert t.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        _screenshot(page, tmp_path, f"render-{name}-1-opened", viewport)

        # A click selects the event under the pointer: one more drawing, the tick and window highlighted.
        ticks.last.click()
        t.wait_for_selector("#event-form:not([hidden])")
        index = t.get_attribute(".tl-row[data-target='pan'] .tl-event.selected", "data-event")
        assert index is not None and int(index) >= COUNT
        assert t.locator(f".tl-row[data-target='pan'] .tl-window.selected[data-event='{index}']").count() == 1
        assert t.inner_text("#insp-where").startswith("pan · event @ 1.")
        assert _settled_draws(page) == 2
        _screenshot(page, tmp_path, f"render-{name}-2-clicked", viewport)

        # By keyboard: focus the first event, Enter selects it; the focus stays on the selected tick.
        t.locator(".tl-row[data-target='pan'] .tl-event[data-event='0']").focus()
        t.keyboard.press("Enter")
        t.wait_for_selector(".tl-row[data-target='pan'] .tl-event.selected[data-event='0']")
        assert t.inner_text("#insp-where") == "pan · event @ 0s"
        assert t.evaluate("document.activeElement.dataset.event") == "0"
        assert _settled_draws(page) == 3
        _screenshot(page, tmp_path, f"render-{name}-3-keyboard", viewport)

        # Zoomed in, a seek far along scrolls the timeline there, and the events come into view drawn.
        t.click("[data-zoom='32']")
        page.seek(1.5)
        t.wait_for_function("""() => [...document.querySelectorAll(".tl-row[data-target='pan'] .tl-event")]
            .some((n) => Math.abs(Number(n.dataset.time) - 1.5) < 0.001)""")
        assert t.evaluate("document.getElementById('timeline').parentElement.scrollLeft") > 0
        _screenshot(page, tmp_path, f"render-{name}-4-zoomed", viewport)
        assert page.problems == []
