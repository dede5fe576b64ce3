"""From an eval directory and filters to checked, runnable work.

Everything that can fail before the first adapter call fails here: the eval
directory, the case files, the filters, the videos and the sample times.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ..cases.evaldir import EvalConfig, EvalDir, load_cases, open_eval_dir
from ..cases.model import Case, CloudVideo, TargetSpec
from ..errors import Problem, ValidationError, VideoError
from ..support.timevalues import format_time
from ..video.frametable import frame_table
from ..video.probe import END_TOLERANCE_S, VideoInfo, probe
from .schedule import Filters, ScheduledSample, select_cases, selected_streams


@dataclass(frozen=True, slots=True)
class CasePlan:
    """One case as a command runs it: its selected samples and stream targets, and its probed video."""

    case: Case
    samples: tuple[ScheduledSample, ...]
    video_path: Path
    video: VideoInfo | None
    #: The selected stream targets (``events``), fed the whole clip.
    streams: tuple[TargetSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """What a command runs: every selected case of an eval directory."""

    eval_dir: EvalDir
    cases: tuple[CasePlan, ...]

    @property
    def sample_count(self) -> int:
        return sum(len(c.samples) for c in self.cases)

    @property
    def event_count(self) -> int:
        return sum(len(t.stream.events) for c in self.cases for t in c.streams if t.stream is not None)


#: The local file of a case's video: a local path as written, a cloud video from the cache.
VideoResolver = Callable[[Case, EvalConfig], Path]


def local_video(case: Case, config: EvalConfig) -> Path:
    """A resolver for commands that never download: a cloud video is an error naming its store."""
    if isinstance(case.video, CloudVideo):
        raise VideoError(f"{case.video.describe()} is stored in video store {case.video.store!r}; "
                         "run `python -m glasskit_eval video-store pull` first")
    return case.video.path


def check_video_file(path: Path) -> None:
    """Refuse what is not a readable regular file before any decoder opens it (a FIFO would block)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        from ..support.nearby import did_you_mean

        raise VideoError(f"video not found: {path}; check the case file's `video:` path{did_you_mean(path)}"
                         ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise VideoError(f"video {path} is a symlink loop; point the link at the video file") from None
        raise VideoError(f"cannot read video {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else (
            "not a regular file")
        raise VideoError(f"video {path} is {kind}; `video:` must name a video file")


def past_end_problems(case: Case, blocks: Iterable[tuple[str, int, Fraction]], info: VideoInfo,
                      video_name: str) -> list[Problem]:
    """One problem per sample block whose time (the block's last selected one) is past the clip's end.

    ``blocks`` are (target id, block index, time); a time within ``END_TOLERANCE_S`` of the last
    frame is fine, as everywhere else.
    """
    limit = info.end_time + END_TOLERANCE_S
    reported: set[tuple[str, int]] = set()
    problems = []
    for target_id, block_index, time in blocks:
        if time > limit and (target_id, block_index) not in reported:
            reported.add((target_id, block_index))
            problems.append(case.document.problem(
                ("targets", target_id, "samples", block_index),
                f"sample time {format_time(time)}s is past the end of the video "
                f"{video_name} ({format_time(info.end_time)}s from its first frame); "
                "shorten the range or fix the time"))
    return problems


def stream_past_end_problems(case: Case, streams: Iterable[TargetSpec], info: VideoInfo,
                             video_name: str) -> list[Problem]:
    """An event onset or a quiet span that starts past the clip's end can never be seen."""
    limit = info.end_time + END_TOLERANCE_S
    end = f"the end of the video {video_name} ({format_time(info.end_time)}s from its first frame)"
    problems = []
    for target in streams:
        assert target.stream is not None
        for event in target.stream.events:
            if event.at > limit:
                problems.append(case.document.problem(
                    ("targets", target.id, "events", event.index, "at"),
                    f"event at {format_time(event.at)}s is past {end}; fix the time"))
        for start, stop in target.stream.quiet or ():
            if start > limit:
                problems.append(case.document.problem(
                    ("targets", target.id, "quiet"),
                    f"quiet span [{format_time(start)}, {format_time(stop)}]s starts past {end}; remove it "
                    "or fix the time"))
    return problems


def build_plan(eval_dir_path: str | Path, filters: Filters, *, allow_empty: bool,
               resolve_video: VideoResolver = local_video, check_videos: bool = True,
               allow_drafts: bool = False, on_video: Callable[[Path], None] | None = None) -> Plan:
    """Load, select and check the cases; ``on_video`` hears of each video before it is probed."""
    filters.check()
    eval_dir = open_eval_dir(eval_dir_path)
    paths = eval_dir.select_case_paths(filters.case)
    cases = load_cases(eval_dir, paths, allow_empty=allow_empty, targets=filters.targets)
    selected = select_cases(cases, filters, allow_empty=allow_empty, allow_drafts=allow_drafts)
    plans: list[CasePlan] = []
    problems: list[Problem] = []
    for case, samples in selected:
        streams = selected_streams(case, filters)
        if not check_videos:
            plans.append(CasePlan(case, tuple(samples), Path(), None, streams))
            continue
        try:
            video_path = resolve_video(case, eval_dir.config)
            check_video_file(video_path)
            if on_video is not None:
                on_video(video_path)
            info = probe(video_path)
        except VideoError as exc:
            problems.append(case.document.problem(("video",), str(exc)))
            continue
        past_end = past_end_problems(case, ((s.target.id, s.block.index, s.time) for s in samples), info,
                                     video_path.name)
        problems += past_end
        problems += stream_past_end_problems(case, streams, info, video_path.name)
        if not past_end and any(s.block.clip is not None for s in samples):
            # Here: only clip targets plan their frames.
            from .clips import plan_clips

            samples, clip_problems = plan_clips(case, samples, frame_table(video_path), info.end_time,
                                                video_path.name)
            problems += clip_problems
        plans.append(CasePlan(case, tuple(samples), video_path, info, streams))
    if problems:
        raise ValidationError(problems)
    return Plan(eval_dir, tuple(plans))


def undeclared_gate_targets(plan: Plan, filters: Filters) -> dict[str, str]:
    """config.yaml ``per_target`` gates naming a target no selected case declares: target -> why.

    Upstream turns such a gate into a failing one rather than dropping it; with ``--case``
    or ``--target`` the selection may leave the target out on purpose, so it is skipped.
    """
    thresholds = plan.eval_dir.config.thresholds
    if thresholds is None or not thresholds.per_target or filters.case is not None or filters.targets:
        return {}
    declared = {t.id for c in plan.cases for t in c.case.targets}
    lines = plan.eval_dir.config.per_target_lines
    return {target: (f"no case declares target {target!r}, named in config.yaml:{lines.get(target, 0)} "
                     f"(thresholds.per_target.{target}); fix the target id or remove the gate")
            for target in thresholds.per_target if target not in declared}


def clip_durations(plan: Plan) -> dict[str, float]:
    """Each planned case's clip length in seconds (the HTML report's timelines)."""
    return {c.case.name: float(c.video.end_time) for c in plan.cases if c.video is not None}
