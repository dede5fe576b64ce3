"""``list-samples``: the expanded schedule as a table (no video is opened, except to count clips)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..cases.evaldir import EvalConfig
from ..errors import VideoError
from ..plan.clips import select_clip
from ..plan.planning import CasePlan, build_plan, check_video_file, local_video
from ..plan.schedule import Filters
from ..reports.tables import compact, table
from ..support.timevalues import format_time
from ..video.frametable import frame_table
from ..video.probe import probe

if TYPE_CHECKING:
    from ..video.frametable import FrameTable


def execute_list_samples(eval_dir: str | Path, filters: Filters, out: TextIO, *, allow_empty: bool) -> None:
    print(list_samples(eval_dir, filters, allow_empty=allow_empty), file=out)


def list_samples(eval_dir: str | Path, filters: Filters, *, allow_empty: bool) -> str:
    plan = build_plan(eval_dir, filters, allow_empty=allow_empty, check_videos=False)
    # The column appears only with clips, so the table of a clip-free eval reads as it always did.
    with_clips = any(s.block.clip is not None for c in plan.cases for s in c.samples)
    rows = []
    for case_plan in plan.cases:
        counts = _clip_counts(case_plan, plan.eval_dir.config) if with_clips else {}
        for s in case_plan.samples:
            declared = s.block.compare
            mode = ""
            if declared is not None:
                mode = declared.mode + (f" ±{declared.tolerance:g}" if declared.tolerance else "")
            # Shown as `run` and upstream show a target: `Label (id)` when it has a label.
            target = f"{s.target.label} ({s.target.id})" if s.target.label else s.target.id
            row = [s.case.name, target, f"{format_time(s.time)}s",
                   compact(s.expect) if s.block.has_expect else "(draft)", mode, s.field or "",
                   s.block.ignore or "", s.block.source()]
            if with_clips:
                row.append(counts.get(s.sample_index, ""))
            rows.append(row)
        rows += _event_rows(case_plan, with_clips)
    headers = ["Case", "Target", "Time", "Expected", "Mode", "Field", "Ignored", "Source"]
    right = [False, False, True, False, False, False, False, False]
    text = table(f"Samples: {plan.eval_dir.root}", headers + ["Clip"] * with_clips, rows,
                 right + [True] * with_clips)
    if any(cell.startswith(("?", "≤")) for row in rows for cell in row[len(headers):]):
        text += ("\nClip counts marked ? or ≤ depend on a video that is not on this machine "
                 "(every-frame and clamped clips are counted from the video).")
    return text


def _event_rows(case_plan: CasePlan, with_clips: bool) -> list[list[str]]:
    """A stream target's events, one row each: the onset, the expected emission, and the window."""
    rows = []
    for target in case_plan.streams:
        assert target.stream is not None
        shown = f"{target.label} ({target.id})" if target.label else target.id
        for event in target.stream.events:
            a, b = event.span
            compare = event.compare or target.stream.compare
            mode = "" if compare is None else compare.mode + (f" ±{compare.tolerance:g}" if compare.tolerance else "")
            rows.append([case_plan.case.name, shown, f"{format_time(event.at)}s",
                         compact(event.expect) if event.has_expect else "(draft)", mode, target.stream.field or "",
                         "", f"event, window [{format_time(a)}, {format_time(b)}]s"] + [""] * with_clips)
    return rows


def _clip_counts(case_plan: CasePlan, config: EvalConfig) -> dict[int, str]:
    """Frame count of each clip sample, by sample index: exact when it can be known here."""
    clips = [(s, s.block.clip) for s in case_plan.samples if s.block.clip is not None]
    # Only every-frame and clamped clips are counted from the video; a grid's count is declared.
    video = _local_video(case_plan, config) if any(
        spec.every_s is None or spec.edge == "clamp" for _s, spec in clips) else None
    counts = {}
    for sample, spec in clips:
        grid = spec.grid_count
        if grid is not None and spec.edge == "error":
            counts[sample.sample_index] = str(grid)
        elif video is None:
            counts[sample.sample_index] = "?" if grid is None else f"≤{grid}"
        else:
            counts[sample.sample_index] = str(len(select_clip(sample.time, spec, video[0], end_time=video[1])))
    return counts


def _local_video(case_plan: CasePlan, config: EvalConfig) -> tuple[FrameTable, Fraction] | None:
    """The frame table and clip length of the case's video, if it is on this machine (never downloaded)."""
    try:
        path = local_video(case_plan.case, config)
        check_video_file(path)
        return frame_table(path), probe(path).end_time
    except VideoError:
        return None
