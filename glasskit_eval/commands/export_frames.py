"""``export-frames``: write the exact frames an adapter would get, as lossless PNGs."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TextIO

from ..cases.evaldir import load_cases, open_eval_dir
from ..errors import OutputError, UsageError, VideoError
from ..plan.planning import VideoResolver, check_video_file, local_video
from ..support.fsio import write_bytes_atomic
from ..support.timevalues import format_time
from ..video.frames import decode_at
from ..video.png import encode_png
from ..video.probe import probe


def frame_filename(time: Fraction) -> str:
    return f"at-{format_time(time)}s.png"


def execute_export_frames(eval_dir: str | Path, case_name: str, times: Sequence[Fraction],
                          output_dir: str | Path | None, out: TextIO, err: TextIO) -> None:
    """Export, printing each written path (once, in requested order)."""
    from ..plan.videos import video_resolver

    resolve = video_resolver(lambda message: print(message, file=err))
    for path in export_frames(eval_dir, case_name, times, output_dir, resolve_video=resolve):
        print(path, file=out)


def export_frames(eval_dir: str | Path, case_name: str, times: Sequence[Fraction],
                  output_dir: str | Path | None = None, *,
                  resolve_video: VideoResolver = local_video) -> list[Path]:
    """Export one PNG per distinct time (one decode); returns each path once, in requested order."""
    if not times:
        raise UsageError("export-frames needs at least one --at time")
    for t in times:
        if t < 0:
            raise UsageError(f"--at must be a nonnegative time in seconds, got {format_time(t)}")
    # `--at 1.5 --at 1.50` is one time and one file: written and printed once (upstream does the same).
    times = list(dict.fromkeys(times))
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
    out = Path(output_dir) if output_dir is not None else ed.root / "runs" / "frames" / case.name
    out = out.expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise OutputError(f"output path {out} exists and is not a directory; choose another --output-dir")
    written: dict[Fraction, Path] = {}
    for want, frame in decode_at(video_path, times):
        target = out / frame_filename(want)
        try:
            write_bytes_atomic(target, encode_png(frame.image, level=6))
        finally:
            frame.image.close()
        written[want] = target
    return [written[t] for t in times]
