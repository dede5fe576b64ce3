"""The HTML report's one I/O edge: render a summary and write the page atomically.

Rendering itself is :func:`glasskit_eval.reports.html.render_html` (pure); ``run --html`` and
the ``report`` command gather what it needs (thumbnails, clip durations) and call :func:`write_html`.
"""

from __future__ import annotations

import os
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


def shown_eval_dir(recorded: str, given: str | None = None) -> str:
    """The eval directory as review commands in the page should name it.

    ``given`` (the command line's ``--eval-dir``, as typed) wins. Else the recorded absolute path,
    relative to the current directory when it lies under it (CI renders from the checkout), kept
    when it exists here, and otherwise only its name: another machine's absolute path (a CI
    runner's) would not work for whoever reads the page.
    """
    if given is not None:
        return given
    path = Path(recorded)
    if not path.is_absolute():
        return recorded
    try:
        rel = path.relative_to(Path.cwd())
    except ValueError:
        return recorded if path.is_dir() else (path.name or recorded)
    return str(rel) if str(rel) != "." else os.curdir
