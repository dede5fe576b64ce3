"""From an eval directory and filters to checked, runnable work.

Everything that can fail before the first adapter call fails here: the eval
directory, the case files, the filters, the videos and the sample times.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..cases.evaldir import EvalConfig, EvalDir, load_cases, open_eval_dir
from ..cases.model import Case, CloudVideo
from ..errors import Problem, ValidationError, VideoError
from ..support.records import Frozen
from ..support.timevalues import format_time
from ..video.probe import END_TOLERANCE_S, VideoInfo, probe
from .schedule import Filters, ScheduledSample, select_cases


class CasePlan(Frozen):
    _fields = ("case", "samples", "video_path", "video")
    case: Case
    samples: tuple[ScheduledSample, ...]
    video_path: Path
    video: VideoInfo | None

    def __init__(self, case: Case, samples: tuple[ScheduledSample, ...], video_path: Path,
                 video: VideoInfo | None) -> None:
        self.__dict__.update(case=case, samples=samples, video_path=video_path, video=video)


class Plan(Frozen):
    _fields = ("eval_dir", "cases")
    eval_dir: EvalDir
    cases: tuple[CasePlan, ...]

    def __init__(self, eval_dir: EvalDir, cases: tuple[CasePlan, ...]) -> None:
        self.__dict__.update(eval_dir=eval_dir, cases=cases)

    @property
    def sample_count(self) -> int:
        return sum(len(c.samples) for c in self.cases)


def resolve_video(case: Case, config: EvalConfig) -> Path:
    """The local file of a case's video; cloud videos come from (and into) the per-user cache."""
    if isinstance(case.video, CloudVideo):
        import sys

        from ..store.commands import download_video

        return download_video(case.video, config, notify=lambda message: print(message, file=sys.stderr))
    return case.video.path


def build_plan(eval_dir_path: str | Path, filters: Filters, *, allow_empty: bool,
               check_videos: bool = True, allow_drafts: bool = False,
               on_video: Callable[[Path], None] | None = None) -> Plan:
    """Load, select and check the cases; ``on_video`` hears of each video before it is probed."""
    filters.check()
    eval_dir = open_eval_dir(eval_dir_path)
    paths = eval_dir.select_case_paths(filters.case)
    cases = load_cases(eval_dir, paths, allow_empty=allow_empty)
    selected = select_cases(cases, filters, allow_empty=allow_empty, allow_drafts=allow_drafts)
    plans: list[CasePlan] = []
    problems: list[Problem] = []
    for case, samples in selected:
        if not check_videos:
            plans.append(CasePlan(case, tuple(samples), Path(), None))
            continue
        try:
            video_path = resolve_video(case, eval_dir.config)
            if on_video is not None:
                on_video(video_path)
            info = probe(video_path)
        except VideoError as exc:
            problems.append(case.document.problem(("video",), str(exc)))
            continue
        limit = info.end_time + END_TOLERANCE_S
        reported: set[tuple[str, int]] = set()
        for sample in samples:
            block_key = (sample.target.id, sample.block.index)
            if sample.time > limit and block_key not in reported:
                reported.add(block_key)
                problems.append(case.document.problem(
                    ("targets", sample.target.id, "samples", sample.block.index),
                    f"sample time {format_time(sample.time)}s is past the end of the video "
                    f"{video_path.name} ({format_time(info.end_time)}s from its first frame); "
                    "shorten the range or fix the time"))
        plans.append(CasePlan(case, tuple(samples), video_path, info))
    if problems:
        raise ValidationError(problems)
    return Plan(eval_dir, tuple(plans))
