"""The one check every writer of case files makes before it writes: the new text is a valid case file."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ..errors import Problem
from ..yamltext.source import load_yaml_text
from .model import Case
from .parse import parse_case


def parse_candidate(text: str, path: Path, *,
                    allow_empty: bool | Collection[str] = True) -> tuple[Case | None, list[Problem]]:
    """Parse ``text`` as the case file at ``path``; the case, or the problems ``validate`` would report.

    Drafts are allowed (labelling leaves them), and empty targets as ``allow_empty`` says (True,
    or the targets that may be empty); video checks are the caller's (see ``plan.planning.past_end_problems``), since a
    missing video must not block labelling.
    """
    doc, problems = load_yaml_text(text, str(path))
    if problems:
        return None, problems
    return parse_case(doc, path, allow_empty=allow_empty)
