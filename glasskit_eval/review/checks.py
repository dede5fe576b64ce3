"""The check every candidate case file passes before the review server writes it.

It is ``validate``'s own code for one file: the YAML loader, the case-file
parser with empty targets refused, and the past-the-end check of planning. Two
things ``validate`` refuses stay possible while labelling, on purpose: drafts
(blocks without ``expect``, which the page counts and the case list flags), and
targets that were already empty in the file before this edit (a skeleton file
written by hand must stay editable one target at a time). An edit can never
*make* a target empty.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ..cases.edit import parse_candidate
from ..cases.model import Case, block_times
from ..errors import Problem, VideoError


def candidate_problems(path: Path, text: str, *, keep_empty: Collection[str] | None = None) -> list[Problem]:
    """Problems ``validate`` would report for ``text`` as the contents of ``path``.

    ``keep_empty`` names targets that may stay empty (they already were);
    ``None`` lets every target be empty (restoring a file state that existed before).
    """
    return checked_case(path, text, keep_empty=keep_empty)[1]


def checked_case(path: Path, text: str, *,
                 keep_empty: Collection[str] | None = None) -> tuple[Case | None, list[Problem]]:
    """``candidate_problems``, and the parsed case when there are none (the writer keeps it: one parse)."""
    from .casedata import PARSED

    PARSED.parses += 1
    case, problems = parse_candidate(text, path, allow_empty=True if keep_empty is None else keep_empty)
    if problems or case is None:
        return None, problems
    problems = past_end_problems(case)
    return (None if problems else case), problems


def past_end_problems(case: Case) -> list[Problem]:
    """Sample times (and event onsets) after the clip's end fail every ``run``: planning's own checks."""
    from ..plan.planning import past_end_problems as planning_past_end
    from ..plan.planning import stream_past_end_problems
    from ..video.probe import probe
    from .casedata import video_path

    try:
        path = video_path(case)
        info = probe(path)
    except VideoError:
        return []  # a missing video is shown on the page; it does not block labelling
    blocks = ((target.id, block.index, times[-1]) for target in case.targets for block in target.blocks
              if (times := block_times(block)))
    streams = [t for t in case.targets if t.stream is not None]
    return planning_past_end(case, blocks, info, path.name) + stream_past_end_problems(case, streams, info, path.name)


def short(problem: Problem) -> str:
    """A problem without its file name: the page already says which file it shows."""
    return f"{problem.path}: {problem.message}" if problem.path else problem.message
