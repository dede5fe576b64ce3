"""Clip samples on the review page, in a real headless Chromium.

The selected sample's clip window is drawn on its target's row, with a mark per clip frame, and
its frames are shown as a filmstrip of exact eval frames, one ``/frame?t=`` image per time the
clip asks for. The fixture video's frames carry their index in their pixels, so the test reads
back which frame each image is.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from framecode import read_frame_index
from PIL import Image
from reviewpage import Page, browser, make_eval, opened, served

pytestmark = pytest.mark.browser

__all__ = ["browser"]  # the module-scoped fixture, imported for pytest

CASE = """\
video: cfr_h264.mp4
sample_defaults:
  clip: {before_s: 0.4, every_s: 0.2}
targets:
  door:
    samples:
      - at: [0.5, 1.5]
        expect: closed
      - range: [1.0, 1.4]
        every_s: 0.2
        clip: {before_s: 0.1, after_s: 0.1}
        expect: open
  light:
    samples:
      - at: 0.2
        clip: null
        expect: false
"""


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Page]:
    root = make_eval(tmp_path, CASE)
    with served(root) as server, opened(browser, server) as tab:
        yield tab


def image_requests(page: Page) -> list[str]:
    """The times of every frame loaded as an <img> since the page opened (the browser's own record).

    Only the clip strip loads frames as images; the player and the neighbour strip fetch them.
    """
    urls = page.tab.evaluate("performance.getEntriesByType('resource')"
                             ".filter((e) => e.initiatorType === 'img').map((e) => e.name)")
    return [parse_qs(urlparse(u).query)["t"][0] for u in urls]


def strip(page: Page) -> list[tuple[str, str, bool]]:
    """(frame index, requested time, is the anchor) of each frame of the clip strip."""
    return [(f.get_attribute("data-index") or "", f.get_attribute("data-t") or "",
             "anchor" in (f.get_attribute("class") or ""))
            for f in page.tab.locator("#clipstrip figure").all()]


def frames_shown(page: Page) -> list[int]:
    """The frame index each strip image's pixels carry, fetched with the page's session."""
    out = []
    for img in page.tab.locator("#clipstrip figure img").all():
        src = img.get_attribute("src")
        assert src is not None
        response = page.tab.context.request.get(page.tab.url.split("/", 3)[0] + "//" + urlparse(page.tab.url).netloc + src)
        assert response.ok
        with Image.open(io.BytesIO(response.body())) as image:
            out.append(read_frame_index(image))
    return out


def wait_loaded(page: Page, count: int) -> None:
    page.tab.wait_for_function(
        "n => { const imgs = [...document.querySelectorAll('#clipstrip figure img')];"
        " return imgs.length === n && imgs.every((i) => i.complete && i.naturalWidth > 0); }", arg=count)


def test_the_selected_samples_clip_is_drawn_and_its_frames_shown(page: Page, tmp_path: Path) -> None:
    tab = page
    t = tab.tab
    # The page opens on door's first sample, 0.5 s: the inherited clip t-0.4, t-0.2, t.
    tab.frame(5)
    window = t.locator(".tl-row[data-target='door'] .tl-clip")
    window.wait_for()
    assert (window.get_attribute("data-start"), window.get_attribute("data-end")) == ("0.1", "0.5")
    assert window.get_attribute("data-frames") == "3" and window.locator(".tl-clip-frame").count() == 3
    assert t.locator(".tl-row[data-target='light'] .tl-clip").count() == 0
    # Drawn where the window is: from 0.1 s to 0.5 s of the timeline.
    track = t.locator(".tl-row[data-target='door'] .tl-track").bounding_box()
    box = window.bounding_box()
    assert track is not None and box is not None
    px = tab.px_per_s()
    assert abs(box["x"] - track["x"] - 0.1 * px) < 3 and abs(box["width"] - 0.4 * px) < 3
    wait_loaded(tab, 3)
    assert strip(tab) == [("1", "1/10", False), ("3", "3/10", False), ("5", "1/2", True)]
    assert "Clip of door @ 0.5s · 3 frames · [t-0.4, t+0.0] every 0.2s" in t.inner_text("#clipstrip")
    assert frames_shown(tab) == [1, 3, 5]
    # One exact-frame request per clip time, at the exact times the clip asks for.
    assert sorted(image_requests(tab)) == ["1/10", "1/2", "3/10"]
    tab.screenshot(tmp_path, "clip-strip")

    # A sample whose clip is cleared: no window, no strip.
    tab.select_tick("light", 0.2)
    t.wait_for_selector("#clipstrip", state="hidden")
    assert t.locator(".tl-clip").count() == 0

    # A range with its own every-frame clip: the sample under the playhead.
    tab.select_range("door", 1)
    t.wait_for_selector(".tl-row[data-target='door'] .tl-clip[data-start='0.9'][data-end='1.1']")
    wait_loaded(tab, 3)
    assert [(i, a) for i, _, a in strip(tab)] == [("9", False), ("10", True), ("11", False)]
    tab.seek(1.25)
    t.wait_for_selector(".tl-row[data-target='door'] .tl-clip[data-start='1.1'][data-end='1.3']")
    wait_loaded(tab, 3)
    assert [i for i, _, _ in strip(tab)] == ["11", "12", "13"] and frames_shown(tab) == [11, 12, 13]
    # Each clip time loaded once: the first clip's 3, then the range samples' 3 + 3, of which
    # 1.1 s is in both (the page reuses the image it has).
    assert sorted(image_requests(tab)) == sorted(["1/10", "3/10", "1/2", "9/10", "1", "11/10", "6/5", "13/10"])

    # Clicking a strip frame goes to it.
    t.click("#clipstrip figure[data-index='11']")
    tab.frame(11)
    assert tab.problems == []
