"""The HTML report's stream timelines in a real headless Chromium, from a real run's page (file://).

The scripted stream adapter of the stream end-to-end tests fires ``K`` frames after two onsets,
repeats once, answers the third event with a wrong value (a repeat; the event is missed) and emits
twice spuriously (false alarms), so the page must draw exactly 3 windows (2 detected, 1 missed),
2 hits, 2 repeats and 2 false alarms. The frames under the strip are read back from their pixels
(the fixture videos carry each frame's index): the miss shows its onset frame, each false alarm
the frame the adapter answered, all from the run's own decode.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import Browser, browser
from evalkit import run_cli
from framecode import read_frame_index
from PIL import Image
from test_e2e_streams import K, case_text, scenario, write_eval

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the report's Chromium fixture, imported for pytest


def _pixels_index(uri: str) -> int:
    prefix = "data:image/jpeg;base64,"
    assert uri.startswith(prefix)
    with Image.open(io.BytesIO(base64.b64decode(uri[len(prefix):]))) as image:
        return read_frame_index(image.convert("RGB"))


@pytest.fixture(params=["cfr_h264.mp4", "bframes_h264.mp4"])
def stream_report(request: Any, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A page from a real run (made before the browser starts: Playwright's sync API owns the loop)."""
    video = request.param
    s = scenario(video)
    eval_dir = write_eval(tmp_path, video, {"onsets": s["onsets"], "k": K, "spurious": s["spurious"]},
                          case_text(video, s["ats"]))
    page = tmp_path / "report.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--html", page, "--min-recall", "0.9")
    assert code == 1, err  # 2 of 3 detected: the recall gate fails
    return page, s


def test_stream_timeline_and_frames_in_chromium(stream_report: tuple[Path, dict[str, Any]], browser: Browser) -> None:
    page, s = stream_report
    tab = browser.open(page)
    assert tab.inner_text("#verdict") == "FAILED"
    stream = tab.locator(".st-stream[data-case='c'][data-target='pan']")
    assert stream.count() == 1

    def count(selector: str) -> int:
        return int(stream.locator(selector).count())

    assert (count("rect.st-window"), count("rect.st-detected"), count("rect.st-missed")) == (3, 2, 1)
    assert (count("line.st-hit"), count("line.st-repeat"), count("line.st-false-alarm")) == (2, 2, 2)
    assert count("path.st-miss") == 1
    # Emissions sit where they were timed: each false alarm at its spurious frame's media time.
    times = s["times"]
    alarm_x = sorted(float(x) for x in stream.locator("line.st-false-alarm").evaluate_all(
        "ls => ls.map(l => l.dataset.time)"))
    assert alarm_x == [float(times[i]) for i in s["spurious"]]
    # The missed window is the third event's, with the cross at its onset.
    assert float(stream.locator("rect.st-missed").get_attribute("data-at") or "nan") == float(s["ats"][2])

    # The miss shows its onset frame, each false alarm the frame the app answered: read from the pixels.
    misses = stream.locator("figure.st-frame-miss")
    assert misses.count() == 1
    assert misses.get_attribute("data-frame") == str(s["onsets"][2])
    assert _pixels_index(misses.locator("img").get_attribute("src") or "") == s["onsets"][2]
    alarms = stream.locator("figure.st-frame-alarm")
    assert alarms.count() == 2
    shown = [(int(a.get_attribute("data-frame") or -1), _pixels_index(a.locator("img").get_attribute("src") or ""))
             for a in alarms.all()]
    assert shown == [(i, i) for i in s["spurious"]]
    widths = stream.locator("figure.st-frame img").evaluate_all("imgs => imgs.map(i => i.complete && i.naturalWidth)")
    assert widths == [128, 128, 128]

    # The figures table says the same.
    figures = tab.inner_text("#stream-figures")
    assert "2/3" in figures and "66.7%" in figures

    # Self-contained: nothing was fetched, nothing complained.
    assert browser.problems == []
    assert browser.requests == []
