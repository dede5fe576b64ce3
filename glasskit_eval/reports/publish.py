"""The HTML report's one I/O edge: render a summary and write the page atomically.

Rendering itself is :func:`glasskit_eval.reports.html.render_html` (pure); ``run --html`` and
the ``report`` command gather what it needs (thumbnails, clip durations) and call :func:`write_html`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..support.fsio import write_text_atomic
from .html import HtmlOptions, render_html

if TYPE_CHECKING:
    from ..summary import RunSummary


def write_html(path: Path, summary: RunSummary, options: HtmlOptions) -> None:
    """Render and write atomically; artifact links are made relative to the page's folder."""
    options = replace(options, output_dir=str(path.expanduser().resolve().parent))
    write_text_atomic(path, render_html(summary, options))
