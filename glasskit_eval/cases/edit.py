"""The one check every writer of case files makes before it writes: the new text is a valid case file."""

from __future__ import annotations

from pathlib import Path

from ..errors import Problem
from ..yamltext.source import load_yaml_text
from .model import Case
from .parse import parse_case


def candidate_problems(text: str, path: Path) -> tuple[Case | None, list[Problem]]:
    """Parse ``text`` as the case file at ``path``; the case, or the problems ``validate`` would report.

    Drafts and empty targets are allowed (labelling leaves them); video checks are the caller's
    (see ``plan.planning.past_end_problems``), since a missing video must not block labelling.
    """
    doc, problems = load_yaml_text(text, str(path))
    if problems:
        return None, problems
    return parse_case(doc, path, allow_empty=True)
