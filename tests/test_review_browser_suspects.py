"""``review --report R.json --suspects`` in a real headless Chromium, opened by the command the run printed.

A real run with three voting arms and two repeats finds three labels the votes contradict
(``labelkit``); the printed command opens the first, the bar steps through them, and "Use
consensus" relabels each in the case file. On a desktop (1440x900) and a phone (390x844).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from evalkit import ROOT
from labelkit import RUN, labels_eval
from PIL import Image
from reviewpage import Page, browser  # noqa: F401  (browser: the module's Chromium fixture)

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def printed(tmp_path: Path) -> tuple[Path, list[str]]:
    """The eval, and the review command its run printed (the run in a subprocess: Playwright owns this loop)."""
    root = labels_eval(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", "eval", *RUN,
                           "--output-json", "r.json"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"^Review them: (.+)$", proc.stdout, re.MULTILINE)
    assert found is not None, proc.stdout
    return root, shlex.split(found.group(1))


@contextmanager
def review(tmp_path: Path, words: list[str]) -> Iterator[str]:
    """The printed command run as printed (``python`` being this interpreter), without opening a browser."""
    assert words[0] == "python"
    with subprocess.Popen([sys.executable, *words[1:], "--no-open"], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("Review UI: "), line
            yield line.split("Review UI: ", 1)[1].strip()
        finally:
            proc.terminate()
            proc.communicate(timeout=10)


@contextmanager
def opened(chromium: Any, url: str, viewport: dict[str, int]) -> Iterator[Page]:
    context = chromium.new_context(viewport=viewport)
    problems: list[str] = []
    try:
        tab = context.new_page()
        tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        tab.goto(url)
        tab.wait_for_selector("#frame-label[data-index]")
        yield Page(tab, problems)
    finally:
        context.close()


def shot(page: Page, tmp_path: Path, name: str, viewport: dict[str, int]) -> Path:
    folder = Path(os.environ.get("GLASSKIT_REVIEW_SCREENS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.tab.wait_for_selector("#frame-label:not(.stale)")
    page.tab.screenshot(path=str(path))
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "screenshot looks blank"
        assert image.size == (viewport["width"], viewport["height"])
    return path


def expectations(root: Path) -> dict[float, Any]:
    doc = yaml.safe_load((root / "cases" / "clip.yaml").read_text())
    out = {}
    for block in doc["targets"]["ok"]["samples"]:
        times = block["at"] if isinstance(block["at"], list) else [block["at"]]
        for t in times:
            out[float(t)] = block.get("expect")
    return out


def in_view(page: Page, selector: str, viewport: dict[str, int]) -> None:
    box = page.tab.locator(selector).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"] + 0.5, (selector, box)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_printed_command_steps_through_the_suspects_and_relabels_them(
        browser: Any, printed: tuple[Path, list[str]], tmp_path: Path,  # noqa: F811
        viewport: dict[str, int]) -> None:
    root, words = printed
    name = "desktop" if viewport is DESKTOP else "phone"
    with review(tmp_path, words) as url, opened(browser, url, viewport) as page:
        tab = page.tab
        tab.wait_for_selector("#suspects-bar:not([hidden])")
        page.frame(3)
        assert tab.inner_text("#suspect-count") == "Suspect label 1 of 3"
        assert tab.inner_text("#suspect-where") == "clip / ok at 0.3 s"
        assert (tab.inner_text("#suspect-label"), tab.inner_text("#suspect-consensus")) == ("false", "true")
        assert tab.inner_text("#suspect-votes") == "6 of 6 votes"
        for selector in ("#suspect-relabel", "#suspect-next", "#suspect-prev"):
            in_view(page, selector, viewport)
        shot(page, tmp_path, f"suspects-{name}-first", viewport)

        assert tab.is_hidden("#suspect-done")
        tab.click("#suspect-relabel")
        page.saves(1)
        assert expectations(root)[0.3] is True
        tab.wait_for_selector("#suspect-done:not([hidden])")

        tab.click("#suspect-next")
        tab.wait_for_selector("#suspects-bar[data-index='1']")
        page.frame(7)
        assert tab.inner_text("#suspect-where") == "clip / ok at 0.7 s"
        tab.click("#suspect-relabel")
        page.saves(2)
        tab.click("#suspect-next")
        tab.wait_for_selector("#suspects-bar[data-index='2']")
        page.frame(12)
        assert tab.is_disabled("#suspect-next") and not tab.is_disabled("#suspect-prev")
        tab.click("#suspect-relabel")
        page.saves(3)
        shot(page, tmp_path, f"suspects-{name}-last", viewport)
        labels = expectations(root)
        assert [t for t, v in sorted(labels.items()) if v is not True] == []
        assert page.problems == []
