"""``export-frames``: write the exact frames an adapter would get, as lossless PNGs."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TextIO

from ..cases.evaldir import EvalDir, load_cases, open_eval_dir
from ..cases.model import Case
from ..errors import OutputError, UsageError, VideoError
from ..plan.planning import VideoResolver, build_plan, check_video_file, local_video
from ..plan.schedule import Filters
from ..plan.videos import video_resolver
from ..support.fsio import write_bytes_atomic
from ..support.timevalues import format_time, same_time_key
from ..video.frames import decode_at
from ..video.png import encode_png
from ..video.probe import probe

#: How a requested time is written: a single frame, or one frame of a clip (named with its index too).
_SINGLE, _CLIP = "single", "clip"


def frame_filename(time: Fraction) -> str:
    return f"at-{format_time(time)}s.png"


def clip_frame_filename(time: Fraction, frame_index: int) -> str:
    """A clip frame: the time the clip asks for and the frame it gets (a fine grid repeats frames)."""
    return f"at-{format_time(time)}s-frame-{frame_index}.png"


def execute_export_frames(eval_dir: str | Path, case_name: str, times: Sequence[Fraction],
                          output_dir: str | Path | None, out: TextIO, err: TextIO, *,
                          target: str | None = None) -> None:
    """Export, printing each written path (once, in requested order)."""
    resolve = video_resolver(lambda message: print(message, file=err))
    for path in export_frames(eval_dir, case_name, times, output_dir, resolve_video=resolve, target=target):
        print(path, file=out)


def export_frames(eval_dir: str | Path, case_name: str, times: Sequence[Fraction],
                  output_dir: str | Path | None = None, *,
                  resolve_video: VideoResolver = local_video, target: str | None = None) -> list[Path]:
    """Export one PNG per distinct time (one decode); returns each path once, in requested order.

    With ``target`` the times are that target's sample times, and a clip sample exports every
    frame of its clip, in clip order.
    """
    if not times:
        raise UsageError("export-frames needs at least one --at time")
    for t in times:
        if t < 0:
            raise UsageError(f"--at must be a nonnegative time in seconds, got {format_time(t)}")
    # `--at 1.5 --at 1.50` is one time and one file: written and printed once (upstream does the same).
    times = list(dict.fromkeys(times))
    if target is not None:
        return _export_samples(eval_dir, case_name, target, times, output_dir, resolve_video)
    ed = open_eval_dir(eval_dir)
    paths = ed.select_case_paths(case_name)
    # Drafts and ignored samples do not matter here: only the video is needed.
    case = load_cases(ed, paths, allow_empty=True)[0]
    video_path = resolve_video(case, ed.config)
    check_video_file(video_path)
    info = probe(video_path)
    for t in times:
        # Unlike `run`'s sample times, which may overshoot a rounded duration by END_TOLERANCE_S,
        # an export time past the clip is rejected outright (the upstream manual says so).
        if t > info.end_time:
            raise VideoError(f"--at {format_time(t)}s is past the end of {video_path} (clip length "
                             f"{format_time(info.end_time)}s from its first frame); choose a time up to "
                             f"{format_time(info.end_time)}s")
    written = _write(video_path, _output_dir(ed, case, output_dir), {t: {_SINGLE} for t in times})
    return [written[(t, _SINGLE)] for t in times]


def _export_samples(eval_dir: str | Path, case_name: str, target: str, times: list[Fraction],
                    output_dir: str | Path | None, resolve_video: VideoResolver) -> list[Path]:
    """The target's samples at ``times``, planned as ``run`` plans them (clips, edges, end of video)."""
    # Drafts are exported too: looking at a sample's frames is how its label gets written.
    plan = build_plan(eval_dir, Filters(case=case_name, targets=(target,), at=tuple(times)), allow_empty=True,
                      allow_drafts=True, resolve_video=resolve_video)
    case_plan = plan.cases[0]
    wanted: dict[Fraction, set[str]] = {}
    for sample in case_plan.samples:
        if sample.clip is None:
            wanted.setdefault(sample.time, set()).add(_SINGLE)
        else:
            for time in sample.clip.times:
                wanted.setdefault(time, set()).add(_CLIP)
    written = _write(case_plan.video_path, _output_dir(plan.eval_dir, case_plan.case, output_dir), wanted)
    # --at matches scheduled times to 9 decimals, as list-samples and run do.
    by_time = {same_time_key(s.time): s for s in case_plan.samples}
    paths: list[Path] = []
    for t in times:
        sample = by_time[same_time_key(t)]
        entries = [(sample.time, _SINGLE)] if sample.clip is None else [(e, _CLIP) for e in sample.clip.times]
        paths += [p for p in dict.fromkeys(written[key] for key in entries) if p not in paths]
    return paths


def _output_dir(ed: EvalDir, case: Case, output_dir: str | Path | None) -> Path:
    out = Path(output_dir) if output_dir is not None else ed.root / "runs" / "frames" / case.name
    out = out.expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise OutputError(f"output path {out} exists and is not a directory; choose another --output-dir")
    return out


def _write(video_path: Path, out: Path, wanted: dict[Fraction, set[str]]) -> dict[tuple[Fraction, str], Path]:
    """Decode each wanted time once and write its file(s); (time, kind) -> path."""
    written: dict[tuple[Fraction, str], Path] = {}
    for want, frame in decode_at(video_path, list(wanted)):
        try:
            data = encode_png(frame.image, level=6)
        finally:
            frame.image.close()
        for kind in sorted(wanted[want]):
            name = frame_filename(want) if kind == _SINGLE else clip_frame_filename(want, frame.index)
            write_bytes_atomic(out / name, data)
            written[(want, kind)] = out / name
    return written
