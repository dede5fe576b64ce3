"""The HTML report on a laptop (1440x900) and a phone (390x844), in real headless Chromium.

A real run of a fixture video (so the frames are real), written with ``--eval-dir eval`` from the
directory holding it, as CI does. Checked: nothing pans the page sideways, the failed samples and
the lightbox sit inside the viewport, the lightbox opens on a click and on a sample's anchor in
the URL, steps with buttons and arrow keys, closes on Escape, shows the frame at its real size,
the whole observation and a copyable one-line review command naming the eval directory as given.
Screenshots with the lightbox open go to ``$GLASSKIT_SCREENSHOT_DIR`` when set.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import chromium, keep_screenshot
from evalkit import make_eval, run_cli

pytestmark = pytest.mark.browser

__all__ = ["chromium"]  # a bare Chromium per test, imported for pytest

VIEWPORTS = {"1440x900": (1440, 900), "390x844": (390, 844)}

CASE = """
video: cfr_h264.mp4
sample_defaults:
  field: state
targets:
  front_door_with_a_rather_long_target_name:
    label: Front door
    samples:
    - range: [0.0, 2.0]
      every_s: 0.1
      expect: closed
  light:
    samples:
    - at: [0.3, 0.6, 1.2]
      expect: "off"
"""

ADAPTER = """
def create_evaluator(config):
    return Doors()

class Doors:
    def evaluate(self, sample, target):
        if target.id == "light":
            if sample.timestamp_s > 1:
                raise RuntimeError("lamp unreachable: the bridge at 10.0.0.7 refused the connection " * 3)
            return {"state": "off" if sample.frame_index == 6 else "on", "brightness": 0.4}
        state = "closed" if sample.frame_index % 4 else "open"
        return {"state": state, "confidence": 0.93, "boxes": [[12, 8, 40, 60]], "note": "x" * 300}
"""


@pytest.fixture
def report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The page of a real run made from ``tmp_path`` with ``--eval-dir eval`` (made before the browser)."""
    make_eval(tmp_path, {"doors-with-a-long-case-name": CASE}, adapter=ADAPTER)
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_cli("run", "--eval-dir", "eval", "--keep-going", "--html", "out/report.html")
    assert code == 1, err
    return tmp_path / "out" / "report.html"


def _open(chromium: Any, url: str, size: tuple[int, int], problems: list[str]) -> Any:
    context = chromium.new_context(viewport={"width": size[0], "height": size[1]}, offline=True)
    tab = context.new_page()
    tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
           else None)
    tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    tab.goto(url)
    tab.wait_for_selector("body[data-ready]")
    return tab


def _inside(tab: Any, selector: str) -> None:
    box = tab.locator(selector).bounding_box()
    view = tab.viewport_size
    assert box is not None, f"{selector} is not shown"
    assert box["x"] >= -0.5 and box["y"] >= -0.5, (selector, box)
    assert box["x"] + box["width"] <= view["width"] + 0.5, (selector, box, view)
    assert box["y"] + box["height"] <= view["height"] + 0.5, (selector, box, view)


def _no_panning(tab: Any) -> None:
    width, inner = tab.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"the page pans sideways: {width} > {inner}"


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_failures_and_lightbox_fit_the_screen(report: Path, chromium: Any, tmp_path: Path, viewport: str) -> None:
    problems: list[str] = []
    tab = _open(chromium, report.as_uri(), VIEWPORTS[viewport], problems)
    _no_panning(tab)
    # The evidence first: the failed samples follow the gates, before the per-run tables.
    order = tab.eval_on_selector_all("section[id]", "s => s.map(x => x.id)")
    assert order.index("failures") < order.index("trials") < order.index("samples")
    cards = tab.locator("#failure-list li")
    assert cards.count() == 7  # door frames 0, 4, 8, 12, 16; light 0.3 s fails; light 1.2 s errors
    assert "error" in cards.nth(0).inner_text() and "lamp unreachable" in cards.nth(0).inner_text()
    box = cards.nth(0).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORTS[viewport][0]
    # One-row tables start folded.
    assert tab.evaluate("document.querySelector('#cases details').open") is False

    # Open the first failure (not the error): the frame at its real size, the whole observation.
    cards.nth(1).click()
    tab.wait_for_selector("#lightbox:not([hidden])")
    for part in ("#lightbox .lb-panel", "#lb-prev", "#lb-next", "#lb-close", "#lb-title"):
        _inside(tab, part)
    assert tab.inner_text("#lb-count") == "2 of 7"
    size = tab.evaluate("(() => { const i = document.getElementById('lightbox-img');"
                        " return [i.complete, i.naturalWidth, i.naturalHeight, i.dataset.kind]; })()")
    assert size == [True, 128, 72, "full"]
    _inside(tab, "#lightbox-img")
    observation = tab.inner_text("#lb-observation")
    assert '"confidence": 0.93' in observation and '"state": "open"' in observation and "x" * 300 in observation
    command = tab.inner_text("#lb-cmd")
    assert command.startswith("python -m glasskit_eval review --eval-dir eval --case doors-with-a-long-case-name")
    assert str(tmp_path) not in command
    # The command is one line that scrolls in its box; the copy button stays beside it, on screen.
    tab.locator("#lb-copy").scroll_into_view_if_needed()
    _inside(tab, "#lb-copy")
    _inside(tab, "#lb-cmd")
    lines = tab.evaluate("(() => { const p = document.getElementById('lb-cmd'); const s = getComputedStyle(p);"
                         " return [s.whiteSpace, p.scrollHeight < parseFloat(s.fontSize) * 2.6]; })()")
    assert lines == ["pre", True]
    _no_panning(tab)
    tab.locator("#lb-title").scroll_into_view_if_needed()
    keep_screenshot(tab, tmp_path / f"html-report-{viewport}-lightbox.png")

    # The URL names the sample; arrow keys and buttons step; Escape closes.
    anchor = tab.evaluate("location.hash")
    assert anchor.startswith("#sample-doors-with-a-long-case-name-front_door_with_a_rather_long_target_name-")
    tab.keyboard.press("ArrowRight")
    assert tab.inner_text("#lb-count") == "3 of 7"
    tab.click("#lb-prev")
    tab.keyboard.press("ArrowLeft")
    assert tab.inner_text("#lb-count") == "1 of 7"
    assert tab.evaluate("document.getElementById('lb-prev').disabled")
    assert "lamp unreachable" in tab.inner_text("#lb-reason")
    assert tab.evaluate("document.getElementById('lightbox-img').hidden") is False
    tab.click("#lb-next")
    assert tab.inner_text("#lb-count") == "2 of 7"
    tab.keyboard.press("Escape")
    tab.wait_for_selector("#lightbox", state="hidden")
    assert tab.evaluate("location.hash") == ""

    # The anchor opens the same sample in a fresh tab.
    tab.context.close()
    tab = _open(chromium, report.as_uri() + anchor, VIEWPORTS[viewport], problems)
    tab.wait_for_selector("#lightbox:not([hidden])")
    assert tab.inner_text("#lb-count") == "2 of 7"
    _inside(tab, "#lightbox .lb-panel")
    _no_panning(tab)
    tab.keyboard.press("Escape")
    tab.evaluate("window.scrollTo(0, 0)")
    keep_screenshot(tab, tmp_path / f"html-report-{viewport}.png")
    tab.screenshot(path=str(tmp_path / f"html-report-{viewport}-full.png"), full_page=True)
    keep = os.environ.get("GLASSKIT_SCREENSHOT_DIR")
    if keep:
        shutil.copy(tmp_path / f"html-report-{viewport}-full.png", Path(keep))
    tab.context.close()
    assert problems == []
