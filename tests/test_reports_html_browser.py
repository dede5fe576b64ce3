"""The HTML report in a real headless Chromium (Debian's ``chromium``, driven by Playwright), from file://.

Any request other than the page itself fails the test (a route aborts and records it), console
errors and page errors fail it, and a dialog (an injected ``alert``) fails it. Skipped when
Playwright or Chromium is missing, except in CI (``CI=true``). Set ``GLASSKIT_SCREENSHOT_DIR`` to
also keep the screenshots there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chromiumkit import Browser, browser, keep_screenshot
from evalkit import make_eval, run_cli
from htmlkit import result, summary_of

from glasskit_eval.reports.html import HtmlOptions, render_html
from glasskit_eval.reports.thumbnails import make_thumbnail
from glasskit_eval.results import Status

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the report's Chromium fixture, imported for pytest

HOSTILE = '<script>alert("pwned")</script> \'single\' "double" </style><b>bold</b>'

CASE = """
video: cfr_h264.mp4
targets:
  door:
    label: Door
    samples:
    - range: [0.0, 2.0]
      every_s: 0.1
      expect: closed
  light:
    samples:
    - at: [0.3, 0.6, 1.2]
      expect: false
"""

ADAPTER = f"""
HOSTILE = {HOSTILE!r}

def create_evaluator(config):
    return Doors()

class Doors:
    def evaluate(self, sample, target):
        if target.id == "light":
            if sample.timestamp_s > 1:
                raise RuntimeError("lamp unreachable " + HOSTILE)
            return sample.frame_index == 6
        return "closed" if sample.frame_index % 4 else HOSTILE
"""


def _rows(tab: Any) -> list[dict[str, str]]:
    result: list[dict[str, str]] = tab.eval_on_selector_all(
        "#sample-body tr", "rows => rows.map(r => ({cls: r.className, cells: [...r.cells].map(c => c.textContent)}))")
    return result


@pytest.fixture
def real_report(tmp_path: Path) -> Path:
    """A page from a real run; made before the browser starts (Playwright's sync API owns the loop)."""
    eval_dir = make_eval(tmp_path, {"doors": CASE}, adapter=ADAPTER)
    page_path = tmp_path / "report.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--html", page_path)
    assert code == 1, err
    return page_path


def test_report_of_a_real_run_in_chromium(real_report: Path, browser: Browser, tmp_path: Path) -> None:
    tab = browser.open(real_report)
    assert tab.inner_text("#verdict") == "FAILED"

    # Failures first, each with its thumbnail decoded and shown.
    rows = _rows(tab)
    assert rows[0]["cls"] == "r-error" and rows[1]["cls"] == "r-failed"
    failing = [r for r in rows if r["cls"] in ("r-failed", "r-error")]
    assert len(failing) == 7  # door frames 0, 4, 8, 12, 16; light 0.3 s; light 1.2 s errors
    widths = tab.eval_on_selector_all("#sample-body img.thumb", "imgs => imgs.map(i => i.complete && i.naturalWidth)")
    assert len(widths) == 7 and all(w == 128 for w in widths)

    # Hostile observed values are text: no extra script, no bold element, the exact string shown.
    assert tab.evaluate("document.scripts.length") == 2
    assert tab.evaluate("document.querySelectorAll('#sample-body b').length") == 0
    assert any(HOSTILE in "".join(r["cells"]) for r in failing)

    # Filter by status: only errors.
    for status in ("failed", "passed", "ignored"):
        tab.uncheck(f".f-status[value='{['error', 'failed', 'passed', 'ignored'].index(status)}']")
    rows = _rows(tab)
    assert [r["cls"] for r in rows] == ["r-error"] and "lamp unreachable" in rows[0]["cells"][-2]
    assert "review --eval-dir" in rows[0]["cells"][-2]
    tab.check(".f-status[value='1']")
    tab.check(".f-status[value='2']")
    # Filter by target: only light.
    tab.select_option("#f-target", label="light")
    rows = _rows(tab)
    assert len(rows) == 3 and {r["cells"][2] for r in rows} == {"light"}
    assert "3 of 23 attempts match" in tab.inner_text("#sample-count")
    tab.select_option("#f-target", label="all")
    assert len(_rows(tab)) == 23

    # Sorting by time puts 0 s first.
    tab.click("th[data-sort='time']")
    assert _rows(tab)[0]["cells"][3] == "0 s"

    # The timeline: hover shows the sample, a click jumps to its row.
    strip = tab.locator(".tl-row[data-target='0'] svg")
    box = strip.bounding_box()
    assert box is not None
    tab.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2)  # 1.6 s of the 2 s clip
    assert "at 1.6 s (frame 16)" in tab.inner_text("#tip")
    tab.mouse.click(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2)
    flashed = tab.locator("#sample-body tr.flash")
    assert flashed.count() == 1 and "1.6 s" in flashed.inner_text()

    # Click a thumbnail to enlarge it.
    tab.click("#sample-body tr.flash img.thumb")
    tab.wait_for_selector("#lightbox:not([hidden])")
    assert "Frame 16" in tab.inner_text("#lightbox-caption")
    keep_screenshot(tab, tmp_path / "html-report-lightbox.png")
    tab.keyboard.press("Escape")
    tab.wait_for_selector("#lightbox", state="hidden")
    tab.evaluate("window.scrollTo(0, 0)")
    keep_screenshot(tab, tmp_path / "html-report.png", full_page=True)

    assert browser.problems == []
    assert browser.requests == []


def test_ten_thousand_samples_load_and_page(browser: Browser, tmp_path: Path) -> None:
    from framecode import draw_frame

    thumb = make_thumbnail(draw_frame(1, 1280, 720))
    results = []
    for i in range(10_000):
        status = Status.FAILED if i % 10 == 3 else Status.ERROR if i % 97 == 0 else Status.PASSED
        results.append(result(case=f"case-{i // 2500}", target=("left", "right")[i % 2], index=i // 2,
                              t=(i % 2500) / 5, frame=i % 2500, status=status,
                              observed="open" if status is not Status.PASSED else "closed",
                              source="range [0, 500)"))
    thumbs = {(r.case, r.frame_index): thumb for r in results if r.status is not Status.PASSED
              and r.frame_index is not None}
    page_path = tmp_path / "big.html"
    page_path.write_text(render_html(summary_of(results), HtmlOptions(thumbnails=thumbs)))
    tab = browser.open(page_path)
    assert tab.inner_text("#sample-count") == "10000 attempts"
    assert "Rows 1–100 of 10000 · page 1 of 100" in tab.inner_text("#page-label")
    assert len(_rows(tab)) == 100
    assert tab.locator(".tl-case").count() == 4
    tab.click("#page-next")
    assert "Rows 101–200" in tab.inner_text("#page-label")
    tab.uncheck(".f-status[value='2']")
    failing = sum(1 for r in results if r.status is not Status.PASSED)
    assert tab.inner_text("#sample-count") == f"{failing} of 10000 attempts match"
    tab.fill("#f-text", "case-3")
    assert all(r["cells"][1] == "case-3" for r in _rows(tab))
    keep_screenshot(tab, tmp_path / "html-report-10k.png")
    assert browser.problems == []
    assert browser.requests == []


def test_flaky_samples_link_to_their_failing_attempt(browser: Browser, tmp_path: Path) -> None:
    def trial(flaky_status: Status) -> list[Any]:
        return [result(index=i, t=i / 10, status=flaky_status if i == 4 else Status.PASSED) for i in range(8)]

    page_path = tmp_path / "flaky.html"
    page_path.write_text(render_html(summary_of(trial(Status.PASSED), trial(Status.FAILED), trial(Status.PASSED))))
    tab = browser.open(page_path)
    flaky = tab.locator("#stability tr.jump")
    assert flaky.count() == 1 and "PFP" in flaky.inner_text().replace("\t", "").replace("\n", "")
    tab.select_option("#f-trial", label="1")  # the failing attempt is filtered out: a jump clears filters
    flaky.click()
    row = tab.locator("#sample-body tr.flash")
    assert row.count() == 1
    cells = row.locator("td").all_inner_texts()
    assert cells[:2] == ["failed", "2"] and cells[4] == "0.4 s"
    assert tab.input_value("#f-trial") == ""
    assert browser.problems == [] and browser.requests == []
