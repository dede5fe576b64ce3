"""The HTML report of a run with arms, in a real headless Chromium from file://.

A real run of three arms (the plain adapter, a config arm and a perturbation arm at half brightness)
on the self-identifying fixture video: the side-by-side table must show what the JSON report says,
and each flip must show both arms' frames as the run handed them over, the perturbed pixels for
the perturbation arm (measured: half the control's brightness), with nothing fetched from outside.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import Browser, browser
from evalkit import make_eval, read_json, run_cli
from PIL import Image, ImageStat
from test_e2e_arms import ADAPTER, CASE, CONFIG

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the report's Chromium fixture, imported for pytest

ARMS = ("--arm", "small", "--perturb", "brightness:0.5")


@pytest.fixture
def pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The run's page and the one ``report`` renders from its JSON; made before the browser starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    eval_dir = make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER, config=CONFIG)
    (eval_dir / "adapter.yaml").write_text("fail: [3, 7]\n")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, *ARMS, "--html", "run.html", "--output-json", "run.json")
    assert code == 0, err
    code, _out, err = run_cli("report", "run.json", "--html", "report.html", "--eval-dir", eval_dir)
    assert code == 0, err
    return {"run": tmp_path / "run.html", "report": tmp_path / "report.html", "json": tmp_path / "run.json"}


def table(tab: Any) -> list[list[str]]:
    rows: list[list[str]] = tab.eval_on_selector_all(
        "#arms-table tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent.trim()))")
    return rows


def flip_cards(tab: Any, arm: str) -> list[dict[str, Any]]:
    cards: list[dict[str, Any]] = tab.eval_on_selector_all(
        f'.flip-arm[data-arm="{arm}"] li.flip',
        """cards => cards.map(c => ({
            where: c.querySelector('.flip-where').textContent,
            sides: [...c.querySelectorAll('figure.flip-side')].map(f => ({
                arm: f.dataset.arm, status: f.querySelector('.s').textContent,
                text: f.querySelector('figcaption').textContent,
                img: f.querySelector('img') ? f.querySelector('img').src : null,
                width: f.querySelector('img') ? f.querySelector('img').naturalWidth : 0}))}))""")
    return cards


def brightness(uri: str) -> float:
    prefix = "data:image/jpeg;base64,"
    assert uri.startswith(prefix)
    with Image.open(io.BytesIO(base64.b64decode(uri[len(prefix):]))) as image:
        return float(ImageStat.Stat(image.convert("L")).mean[0])


def test_arms_page_of_a_run_in_chromium(pages: dict[str, Path], browser: Browser) -> None:
    report = read_json(pages["json"])
    tab = browser.open(pages["run"])
    rows = table(tab)
    assert [r[0] for r in rows] == ["control", "small", "brightness:0.5"]
    assert [r[1] for r in rows] == ["90.0%", "70.0%", "0.0%"]  # control fails 3, 7; small 3, 7, 10-13
    overall = {c["arm"]: c for c in report["arm_comparisons"] if c["target"] is None}
    for row in rows[1:]:
        c = overall[row[0]]
        assert row[3] == f"{c['delta_pass_rate'] * 100:+.1f} pts"
        assert row[4] == f"{c['ci']['low'] * 100:+.1f} – {c['ci']['high'] * 100:+.1f} pts"
        assert row[5] == f"{c['p_value']:.3g}"
        assert row[6] == ("yes" if c["significant"] else "no")
        assert row[7] == str(len(c["flips"]))
    assert rows[2][6] == "yes" and rows[1][6] == "no"
    assert [r[0] for r in rows if r[-1].endswith("yes")] == report["pareto"]
    summary = report["arms"]["control"]["summary"]
    assert rows[0][2] == f"{summary['pass_rate_ci']['low'] * 100:.1f}% – {summary['pass_rate_ci']['high'] * 100:.1f}%"
    assert rows[0][8].endswith("ms") and rows[0][9].endswith("ms")

    # The config arm sees the control's very pixels: both sides show the same picture.
    small = flip_cards(tab, "small")
    assert [c["where"] for c in small] == [f"clip / ok at {t} s (frame {i})"
                                           for t, i in (("1", 10), ("1.1", 11), ("1.2", 12), ("1.3", 13))]
    for card in small:
        control, arm = card["sides"]
        assert (control["arm"], control["status"], arm["arm"], arm["status"]) == ("control", "passed", "small",
                                                                                 "failed")
        assert control["width"] == arm["width"] == 128 and control["img"] == arm["img"]
        assert '"seen": 1' in arm["text"] and "observed: false" in arm["text"]

    # The perturbation arm's side is the perturbed frame it was given: half as bright.
    dim = flip_cards(tab, "brightness:0.5")
    assert len(dim) == 18  # every sample the control passed
    for card in dim:
        control, arm = card["sides"]
        assert control["status"] == "passed" and arm["status"] == "failed"
        assert control["width"] == arm["width"] == 128 and control["img"] != arm["img"]
        assert brightness(arm["img"]) == pytest.approx(brightness(control["img"]) * 0.5, abs=3.0)
        assert '"seen": null' in arm["text"]

    # The samples table has an arm column and filter.
    tab.select_option("#f-arm", label="small")
    arms_shown = tab.eval_on_selector_all("#sample-body tr", "rows => rows.map(r => r.cells[1].textContent)")
    assert arms_shown == ["small"] * 20
    assert "20 of 60 attempts match" in tab.inner_text("#sample-count")

    # Self-contained: every image is a data URI, nothing else was requested, no script errors.
    sources = tab.eval_on_selector_all("img[src]", "imgs => imgs.map(i => i.src)")
    assert sources and all(s.startswith("data:image/jpeg;base64,") for s in sources)
    assert browser.requests == [] and browser.problems == []


def test_arms_page_rendered_from_the_json_report(pages: dict[str, Path], browser: Browser) -> None:
    tab = browser.open(pages["report"])
    assert [r[0] for r in table(tab)] == ["control", "small", "brightness:0.5"]
    assert [r[1] for r in table(tab)] == ["90.0%", "70.0%", "0.0%"]
    dim = flip_cards(tab, "brightness:0.5")
    assert len(dim) == 18
    # The video gives plain pixels only: the perturbed frame was never kept outside the run.
    assert all(c["sides"][0]["width"] == 128 and c["sides"][1]["img"] is None for c in dim)
    assert "no frame kept" in tab.inner_text('.flip-arm[data-arm="brightness:0.5"]')
    assert browser.requests == [] and browser.problems == []
