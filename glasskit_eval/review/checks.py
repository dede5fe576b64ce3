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
from fractions import Fraction
from pathlib import Path

from ..casefile import Case, block_times, parse_case
from ..errors import Problem, VideoError
from ..timevalues import format_time
from ..yamlsource import format_path, load_yaml_text

#: The parser's words for an empty target (casefile._parse_target); matched to let
#: targets that were empty before the edit through, and only those.
_EMPTY_SAMPLES = "samples is empty"


def candidate_problems(path: Path, text: str, *, keep_empty: Collection[str] | None = None) -> list[Problem]:
    """Problems ``validate`` would report for ``text`` as the contents of ``path``.

    ``keep_empty`` names targets that may stay empty (they already were);
    ``None`` lets every target be empty (restoring a file state that existed before).
    """
    doc, problems = load_yaml_text(text, str(path))
    if problems:
        return problems
    case, problems = parse_case(doc, path, allow_empty=keep_empty is None)
    if keep_empty:
        allowed = {format_path(("targets", t, "samples")) for t in keep_empty}
        problems = [p for p in problems if not (p.path in allowed and p.message.startswith(_EMPTY_SAMPLES))]
    if problems or case is None:
        return problems
    return past_end_problems(case)


def empty_targets(case: Case) -> list[str]:
    return [t.id for t in case.targets if not t.blocks]


def past_end_problems(case: Case) -> list[Problem]:
    """Sample times after the clip's end fail every ``run``; planning refuses them in these words."""
    from ..video.probe import END_TOLERANCE_S, probe
    from .casedata import video_path

    try:
        path = video_path(case)
        info = probe(path)
    except VideoError:
        return []  # a missing video is shown on the page; it does not block labelling
    limit: Fraction = info.end_time + END_TOLERANCE_S
    out = []
    for target in case.targets:
        for block in target.blocks:
            times = block_times(block)
            if times and times[-1] > limit:
                out.append(case.document.problem(
                    ("targets", target.id, "samples", block.index),
                    f"sample time {format_time(times[-1])}s is past the end of the video "
                    f"{path.name} ({format_time(info.end_time)}s from its first frame); "
                    "shorten the range or fix the time"))
    return out


def short(problem: Problem) -> str:
    """A problem without its file name: the page already says which file it shows."""
    return f"{problem.path}: {problem.message}" if problem.path else problem.message
