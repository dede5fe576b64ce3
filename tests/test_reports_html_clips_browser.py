"""A failed clip sample in the HTML report, in real headless Chromium from file://: a filmstrip.

A real run of the B-frame fixture (frames carry their index in their pixels) with clip samples
that fail. Each failed clip's card and lightbox show its anchor and up to 8 evenly spaced clip
frames; every picture is decoded back from the page and its pixels must name the frame index its
caption names, which must be the one the run's JSON report gives for that clip entry. The page
stays self-contained: no request leaves it, every image is a data URI, no console error (a script
or style the Content-Security-Policy refused would log one).
"""

from __future__ import annotations

import base64
import io
import os
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from chromiumkit import Browser, browser
from evalkit import make_eval, read_json, run_cli
from framecode import read_frame_index
from PIL import Image

pytestmark = [pytest.mark.browser, pytest.mark.frames]

__all__ = ["browser"]  # the report's Chromium fixture, imported for pytest

VIDEO = "bframes_h264.mp4"  # 25 fps, 50 frames, B-frames

CASE = textwrap.dedent(f"""\
    video: {VIDEO}
    targets:
      motion:
        samples:
        - at: 1.5
          expect: 0
          clip: {{before_s: 1.2}}
        - at: 0.5
          expect: 0
          clip: {{before_s: 0.2, every_s: 0.1}}
        - at: 1.0
          expect: 0
    """)

ADAPTER = "def judge(sample, target):\n    return len(sample.frames)\n"


def expected_strip(clip: dict[str, Any], anchor_time: float) -> list[tuple[float, int, bool]]:
    """(time, frame index, anchor) the filmstrip shows, by the issue's words: the anchor plus up to 8
    evenly spaced entries of the clip (first and last among them), in time order."""
    times, indexes = clip["timestamps"], clip["frame_indexes"]
    count = len(times)
    anchor = times.index(anchor_time)
    if count <= 9:
        chosen = set(range(count))
    else:
        chosen = {int(Fraction(k * (count - 1), 7) + Fraction(1, 2)) for k in range(8)} | {anchor}
    return [(times[p], indexes[p], p == anchor) for p in sorted(chosen)]


def index_in(uri: str) -> int:
    prefix = "data:image/jpeg;base64,"
    assert uri.startswith(prefix)
    with Image.open(io.BytesIO(base64.b64decode(uri[len(prefix):]))) as image:
        return read_frame_index(image.convert("RGB"))


@pytest.fixture
def clip_report(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """A page and the JSON results of a real run; made before the browser starts."""
    eval_dir = make_eval(tmp_path, {"c": CASE}, ADAPTER, videos=(VIDEO,))
    page = tmp_path / "report.html"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:judge",
                             "--html", page, "--output-json", tmp_path / "r.json", "--min-pass-rate", "1")
    assert code == 1, out + err
    results: list[dict[str, Any]] = read_json(tmp_path / "r.json")["trials"][0]["results"]
    assert [r["status"] for r in results] == ["failed"] * 3
    return page, results


STRIP = """list => [...list.querySelectorAll('li')].map(li => {
    const img = li.querySelector('img');
    return {frame: Number(li.dataset.frame), anchor: li.classList.contains('anchor'),
            caption: li.querySelector('.strip-cap').textContent,
            src: img ? img.src : null, alt: img ? img.alt : null, shown: img ? img.complete && img.naturalWidth : 0};
})"""


def check_strip(shown: list[dict[str, Any]], expected: list[tuple[float, int, bool]]) -> None:
    assert [(s["frame"], s["anchor"]) for s in shown] == [(i, a) for _t, i, a in expected]
    for s, (time, index, anchor) in zip(shown, expected):
        seconds = f"{round(time * 1000) / 1000:g} s"
        assert s["caption"] == f"{seconds} · frame {index}" + (" (anchor)" if anchor else "")
        assert s["alt"] == f"frame {index} at {seconds}"
        assert s["shown"] == 128, "the picture decoded"
        assert index_in(s["src"]) == index, "the pixels are the frame the caption names"


def test_a_failed_clip_sample_shows_its_frames_as_a_filmstrip(clip_report: tuple[Path, list[dict[str, Any]]],
                                                               browser: Browser) -> None:
    page, results = clip_report
    long_clip, short_clip, single = results
    # 30 frames (every frame of 0.3 s .. 1.5 s, the anchor 1.48 s at 1.5 s): 8 evenly spaced, the anchor last.
    assert len(long_clip["clip"]["frame_indexes"]) == 30
    assert len(short_clip["clip"]["frame_indexes"]) == 3 and "clip" not in single
    tab = browser.open(page)

    cards = {card.get_attribute("data-row"): card for card in tab.locator("#failure-list li.card").all()}
    assert len(cards) == 3
    by_time = {r["timestamp_s"]: r for r in results}
    seen = 0
    for card in cards.values():
        where = card.locator(".card-where").inner_text()
        result = next(r for t, r in by_time.items() if f"at {t:g} s" in where)
        strip = card.locator("ol.card-strip")
        if "clip" not in result:
            assert strip.count() == 0, "a single-frame sample has no filmstrip"
            continue
        expected = expected_strip(result["clip"], result["timestamp_s"])
        assert len(expected) == (8 if result is long_clip else 3)
        check_strip(strip.evaluate(STRIP), expected)
        seen += 1
    assert seen == 2

    # The lightbox shows the same strip; a strip frame opens in the main image.
    long_card = next(c for c in cards.values() if "at 1.5 s" in c.locator(".card-where").inner_text())
    long_card.locator(".card-open").click()
    tab.wait_for_selector("#lightbox:not([hidden])")
    expected = expected_strip(long_clip["clip"], 1.5)
    check_strip(tab.locator("#lb-strip").evaluate(STRIP), expected)
    _time, first_index, _anchor = expected[0]
    tab.locator("#lb-strip li").first.locator("img").click()
    assert tab.inner_text("#lightbox-caption").startswith(f"Frame {first_index} at 0.32 s of the clip")
    assert index_in(tab.get_attribute("#lightbox-img", "src") or "") == first_index
    # Stepping to the single-frame failure (failures go by time: 0.5 s, 1 s, 1.5 s) leaves no stale strip.
    tab.click("#lb-prev")
    assert "at 1 s" in tab.inner_text("#lb-title")
    assert tab.locator("#lb-strip").is_hidden() and tab.locator("#lb-strip li").count() == 0
    tab.keyboard.press("ArrowLeft")
    assert "at 0.5 s" in tab.inner_text("#lb-title")
    check_strip(tab.locator("#lb-strip").evaluate(STRIP), expected_strip(short_clip["clip"], 0.5))
    shot = os.environ.get("GLASSKIT_SCREENSHOT_DIR")
    if shot:
        Path(shot).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(shot) / "html-report-clip-lightbox.png"))
    tab.keyboard.press("Escape")

    # Self-contained: every image a data URI, nothing fetched, no refused script or style.
    sources = tab.eval_on_selector_all("img[src]", "imgs => imgs.map(i => i.getAttribute('src'))")
    assert sources and all(s.startswith("data:image/jpeg;base64,") for s in sources)
    assert browser.problems == []
    assert browser.requests == []
    # The strips never make the page pan sideways, on a phone either.
    for width in (1400, 390):
        tab.set_viewport_size({"width": width, "height": 844})
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), width
