"""A sample's clip as the review page draws it: the window and the exact frames, by the run's rule.

The page asks for the selected sample only (``/api/cases/<id>/clip?target=T&t=S``): a case
may hold thousands of clip samples of up to 1,024 frames each, which the case detail should not
carry. Each frame names the exact time the clip asks for (as text, ``"3/10"``), so the page's
``/frame?t=`` requests get the very frames ``run`` hands the adapter, not a float's neighbour.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

from ..cases.model import MAX_CLIP_FRAMES, Case, ClipSpec, block_times
from ..support.timevalues import format_time, same_time_key
from .errors import NotFound


def spec_json(spec: ClipSpec | None) -> dict[str, Any] | None:
    """A block's clip setting (resolved, inherited or its own) for the page; None without one."""
    if spec is None:
        return None
    return {"before_s": float(spec.before_s), "after_s": float(spec.after_s),
            "every_s": None if spec.every_s is None else float(spec.every_s), "edge": spec.edge,
            "text": spec.describe()}


def _sample(case: Case, target_id: str, time: Fraction) -> tuple[Fraction, ClipSpec | None, int]:
    """The exact time, clip setting and block index of ``target_id``'s sample at ``time``."""
    target = case.target(target_id)
    if target is None:
        raise NotFound(f"case {case.name!r} has no target {target_id!r}")
    key = same_time_key(time)
    for block in target.blocks:
        for exact in block_times(block):
            if same_time_key(exact) == key:
                return exact, block.clip, block.index
    raise NotFound(f"target {target_id!r} has no sample at {format_time(time)}s")


def clip_json(case: Case, video: Path, target_id: str, time: Fraction) -> dict[str, Any]:
    """The sample's clip: ``clip`` is None for a single-frame sample, else its window and frames.

    A clip that may not be taken (its window leaves the video without ``edge: clamp``, or it
    holds too many frames) comes with ``error``, the message ``validate`` gives, and no frames.
    """
    anchor, spec, block = _sample(case, target_id, time)
    out: dict[str, Any] = {"target": target_id, "block": block, "time": str(anchor), "time_s": float(anchor),
                           "clip": None}
    if spec is None:
        return out
    from ..plan.clips import clip_window, edge_problem, select_clip
    from ..video.frametable import frame_table
    from ..video.probe import probe

    end = probe(video).end_time
    start, stop = clip_window(anchor, spec)
    clip: dict[str, Any] = {**(spec_json(spec) or {}),
                            "window": [float(max(start, Fraction(0))), float(min(stop, end))],
                            "error": edge_problem(anchor, spec, end), "anchor": None, "frames": []}
    out["clip"] = clip
    if clip["error"] is not None:
        return out
    chosen = select_clip(anchor, spec, frame_table(video), end_time=end)
    if len(chosen) > MAX_CLIP_FRAMES:
        clip["error"] = (f"the clip holds {len(chosen)} frames, more than the limit of {MAX_CLIP_FRAMES:,} "
                         "per clip")
        return out
    clip["anchor"] = chosen.anchor
    clip["frames"] = [{"t": str(e.time), "time_s": float(e.time), "frame_index": e.frame_index,
                       "media_time_s": float(e.media_time)} for e in chosen.entries]
    return out
