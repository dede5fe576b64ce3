"""The review page's report overlay for a run with arms, in a real headless Chromium.

A real arms run (the plain adapter failing frames 3 and 7, a config arm failing 3, 7 and 10-13, and
a perturbation arm at half brightness that fails everything) on the self-identifying fixture video;
the page lists the arms, and the badge, the timeline's markers and the F jumps follow the chosen arm.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT
from reviewpage import browser, opened, served  # noqa: F401  (browser: the module's Chromium fixture)
from test_e2e_arms import ADAPTER, CASE, CONFIG

from glasskit_eval.review.report import load_overlay

pytestmark = pytest.mark.browser


@pytest.fixture
def arms_report(tmp_path: Path) -> tuple[Path, Path]:
    """The eval and its arms report; the run in a subprocess (Playwright owns this thread's loop)."""
    from evalkit import make_eval

    root = make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER, config=CONFIG)
    (root / "adapter.yaml").write_text("fail: [3, 7]\n")
    out = tmp_path / "arms.json"
    proc = subprocess.run([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(root), "--arm", "small",
                           "--perturb", "brightness:0.5", "--output-json", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and out.exists(), proc.stderr
    return root, out


@pytest.fixture
def page(browser: Any, arms_report: tuple[Path, Path]) -> Iterator[Any]:  # noqa: F811
    root, report = arms_report
    with served(root, report=report) as server, opened(browser, server) as opened_page:
        opened_page.frame(0)
        yield opened_page
        assert opened_page.problems == []


def failed_markers(tab: Any) -> list[str]:
    times: list[str] = tab.eval_on_selector_all(".tl-row[data-target='ok'] .tl-marker.failed",
                                                "dots => dots.map(d => d.dataset.time)")
    return times


def test_the_overlay_lists_the_arms_and_shows_the_chosen_one(page: Any, arms_report: tuple[Path, Path]) -> None:
    markers, arms = load_overlay(arms_report[1])
    assert arms == ["control", "small", "brightness:0.5"] and len(markers["clip"]) == 60
    tab = page.tab
    assert tab.is_visible("#report-arm-box")
    options = tab.eval_on_selector_all("#report-arm option", "os => os.map(o => [o.value, o.textContent])")
    assert options == [["control", "control (control)"], ["small", "small"], ["brightness:0.5", "brightness:0.5"]]
    # The control first: its two failures (frames 3 and 7).
    assert "report (control): 18 passed · 2 failed · 0 errors" in tab.inner_text("#report-badge")
    assert failed_markers(tab) == ["0.3", "0.7"]

    tab.select_option("#report-arm", "small")
    tab.wait_for_selector("#report-badge:has-text('report (small)')")
    assert "report (small): 14 passed · 6 failed · 0 errors" in tab.inner_text("#report-badge")
    assert failed_markers(tab) == ["0.3", "0.7", "1", "1.1", "1.2", "1.3"]
    # F steps through the chosen arm's failures only.
    stops = []
    for _ in range(3):
        page.press("f")
        tab.wait_for_selector("#frame-label:not(.stale)")
        stops.append(tab.get_attribute("#frame-label", "data-index"))
    assert stops == ["3", "7", "10"]
    # The inspector's run results are the chosen arm's: observed false at 1.0 s, where the control said true.
    tab.wait_for_selector("#insp-observed:not([hidden])")
    assert "false" in tab.inner_text("#observed-value")

    tab.select_option("#report-arm", "brightness:0.5")
    tab.wait_for_selector("#report-badge:has-text('report (brightness:0.5)')")
    assert "0 passed · 20 failed" in tab.inner_text("#report-badge")
    assert len(failed_markers(tab)) == 20
    assert "true" not in tab.inner_text("#observed-value")


def test_a_report_without_arms_shows_no_selector(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from evalkit import make_eval

    root = make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER)
    out = tmp_path / "plain.json"
    proc = subprocess.run([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(root), "--output-json",
                           str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert load_overlay(out)[1] == []
    with served(root, report=out) as server, opened(browser, server) as opened_page:
        opened_page.frame(0)
        assert opened_page.tab.is_hidden("#report-arm-box")
        assert "report: 20 passed · 0 failed" in opened_page.tab.inner_text("#report-badge")
        assert opened_page.problems == []
