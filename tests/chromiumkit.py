"""Real headless Chromium (Debian's ``chromium`` under Playwright) for the pages we ship.

Tests are skipped when Playwright or Chromium is missing, except in CI (``CI=true``), where the
browser is installed by ``.ci/run`` and a missing one is a failure.

One Chromium per test (``chromium``, ``browser``) or per module (the review page's, in
``reviewpage``), never per session: Playwright's sync API holds an event loop in the thread that
started it, and while it runs ``asyncio.run`` refuses to start, so a run made in-process (``run_cli``)
must come before the browser, in this test and in every later test of the worker.

``browser`` is the HTML report's: a fresh offline profile per test whose pages are opened from
file:// and record every request other than the page's own (aborted), console errors and warnings,
page errors and dialogs. Screenshots kept with ``keep_screenshot`` are also copied to
``$GLASSKIT_SCREENSHOT_DIR`` when set.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

CHROMIUM = os.environ.get("GLASSKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 950}


def need_playwright() -> Any:
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright for Python is not installed (pip install playwright)"
    if reason is None and not Path(CHROMIUM).exists():
        reason = f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    return sync_playwright


@contextmanager
def launched(profile: Path | None = None) -> Iterator[Any]:
    """A Chromium browser, or with ``profile`` a persistent offline context in that folder; closed after."""
    sync_playwright = need_playwright()
    with sync_playwright() as pw:
        if profile is None:
            opened = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        else:
            opened = pw.chromium.launch_persistent_context(
                str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, viewport=VIEWPORT,
                offline=True)
        try:
            yield opened
        finally:
            opened.close()


class Browser:
    """A Chromium context that records every request but the page's, and every console error."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.problems: list[str] = []
        self.requests: list[str] = []

    def open(self, page_path: Path) -> Any:
        url = page_path.resolve().as_uri()
        tab = self.context.new_page()
        tab.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
               if m.type in ("error", "warning") else None)
        tab.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        tab.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        tab.on("request", lambda r: self.requests.append(r.url) if r.url != url else None)

        def refuse(route: Any) -> None:
            if route.request.url == url:
                route.continue_()
            else:
                self.requests.append(route.request.url)
                route.abort()

        tab.route("**/*", refuse)
        tab.goto(url)
        tab.wait_for_selector("body[data-ready]")
        return tab


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """The HTML report's browser (see the module's docstring); request it after any in-process run."""
    with launched(tmp_path / "profile") as context:
        yield Browser(context)


@pytest.fixture
def chromium() -> Iterator[Any]:
    """A bare Chromium browser for this test: make contexts of any viewport on it."""
    with launched() as opened:
        yield opened


def keep_screenshot(tab: Any, path: Path, *, full_page: bool = False) -> None:
    """Screenshot the tab to ``path``; it must not be blank."""
    tab.screenshot(path=str(path), full_page=full_page)
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "screenshot looks blank"
    keep = os.environ.get("GLASSKIT_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
