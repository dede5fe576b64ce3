"""Markers for the kinds of tests, so CI selects them by kind rather than by file name.

- ``e2e``: drives the command line end to end (real videos, real adapter processes, servers).
- ``browser``: drives a page we ship in Debian's Chromium through Playwright.
- ``frames``: the frame path (decoding, planning, the engine, the run command); CI runs these
  again on the newest Python and PyAV, whose side-data and rational types change between majors.
"""

from __future__ import annotations

import pytest

MARKERS = {
    "e2e": "drives the command line end to end",
    "browser": "drives a page we ship in headless Chromium",
    "frames": "the frame path: decoding, planning, the engine and the run command",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
