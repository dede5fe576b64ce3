"""Filmstrips of failed clip samples in the HTML report: which frames, kept without a second
decode, inside the one image budget (anchors first), and the same strip from ``report``.

The frames carry their index in their pixels (``framecode``), so every embedded picture is read
back and must be the frame its strip entry names.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_eval, read_json, run_cli
from framecode import draw_frame, read_frame_index
from htmlkit import page_data, result, summary_of
from PIL import Image

from glasskit_eval.reports.html import HtmlOptions, render_html
from glasskit_eval.reports.thumbnails import (
    STRIP_FRAMES,
    ThumbnailStore,
    data_uri_size,
    make_thumbnail,
    strip_positions,
)
from glasskit_eval.results import ClipFrames, SampleResult, Status


def clip_result(indexes: list[int], anchor: int, *, t0: float = 0.0, step: float = 0.1, case: str = "doors",
                index: int = 0, status: Status = Status.FAILED) -> SampleResult:
    """A result whose clip has one entry per index (times t0 + k*step), the anchor at position ``anchor``."""
    times = tuple(round(t0 + k * step, 6) for k in range(len(indexes)))
    base = result(case=case, index=index, t=times[anchor], frame=indexes[anchor], status=status, observed="open")
    return dataclasses.replace(base, clip=ClipFrames(times, tuple(indexes)))


def spaced(count: int, anchor: int) -> list[int]:
    """The issue's rule, written apart: all of a short clip, else 8 evenly spaced entries plus the anchor."""
    if count <= 9:
        return list(range(count))
    return sorted({int(Fraction(k * (count - 1), 7) + Fraction(1, 2)) for k in range(8)} | {anchor})


@pytest.mark.parametrize(("count", "anchor"), [(1, 0), (3, 2), (9, 8), (9, 4), (10, 9), (30, 29), (41, 20),
                                               (1024, 1023), (1024, 0), (17, 5)])
def test_strip_positions_are_the_anchor_and_up_to_eight_evenly_spaced(count: int, anchor: int) -> None:
    r = clip_result(list(range(count)), anchor)
    got = strip_positions(r)
    assert list(got) == spaced(count, anchor)
    assert anchor in got and len(got) <= STRIP_FRAMES + 1
    if count > 1:
        assert got[0] == 0 and got[-1] == count - 1
    assert strip_positions(result(status=Status.FAILED)) == ()


def test_an_empty_clip_from_an_edited_report_has_no_strip() -> None:
    empty = dataclasses.replace(result(status=Status.FAILED, frame=3), clip=ClipFrames((), ()))
    assert strip_positions(empty) == ()
    store = ThumbnailStore()
    store.keep(empty, draw_frame(3, 128, 72), ())
    data = page_data(render_html(summary_of([empty])))
    assert data["rows"][0][15] is None


def test_repeated_frames_and_float_times_find_the_anchor_entry() -> None:
    # A grid finer than the video: frame 5 answers three times; the anchor is the entry at the sample time.
    r = clip_result([4, 5, 5, 5, 6], 3, t0=0.25, step=0.05)
    assert r.clip is not None and r.clip.anchor_position(r.timestamp_s, r.frame_index) == 3


def decoded(jpeg: bytes) -> int:
    with Image.open(io.BytesIO(jpeg)) as image:
        return read_frame_index(image.convert("RGB"))


def test_the_keeper_keeps_strip_frames_from_the_images_the_call_got() -> None:
    indexes = list(range(10, 40))  # 30 entries: the strip is 8 of them, the anchor last
    r = clip_result(indexes, 29)
    images = [draw_frame(i, 640, 360) for i in indexes]
    store = ThumbnailStore()
    store.keep(r, images[29], images)
    wanted = [indexes[p] for p in spaced(30, 29)]
    assert sorted(store) == [("doors", i) for i in wanted]
    assert all(decoded(store["doors", i]) == i for i in wanted)
    # Only the anchor has a full frame (the lightbox's); the strip frames are thumbnails alone.
    assert list(store.frames) == [("doors", 39)]
    # A passed clip sample keeps nothing, and frames that do not match the clip are not guessed at.
    other = ThumbnailStore()
    other.keep(dataclasses.replace(r, status=Status.PASSED), images[29], images)
    other.keep(r, images[29], images[:5])
    assert sorted(other) == [("doors", 39)]


def test_strips_collected_early_never_crowd_out_a_later_failures_anchor() -> None:
    one = data_uri_size(make_thumbnail(draw_frame(1, 640, 360)))
    store = ThumbnailStore(budget_bytes=int(one * 3.5))
    first = clip_result([1, 2, 3, 4, 5, 6], 5)
    store.keep(first, draw_frame(6, 640, 360), [draw_frame(i, 640, 360) for i in range(1, 7)])
    assert store.strip_bytes <= store.budget_bytes and store.used_bytes == data_uri_size(store["doors", 6])
    for frame in (20, 21):
        store.keep(result(frame=frame, t=frame / 10, status=Status.FAILED), draw_frame(frame, 640, 360))
    # Every anchor kept; the strip got what its own share allowed.
    assert {("doors", 6), ("doors", 20), ("doors", 21)} <= set(store)
    assert 1 <= len([k for k in store if k[1] < 6]) <= 3


def test_the_page_embeds_anchors_first_then_strips_within_one_budget() -> None:
    thumbs = {("doors", i): make_thumbnail(draw_frame(i, 640, 360)) for i in range(0, 60)}
    clip = clip_result(list(range(0, 9)), 8, t0=0.0)
    single = [result(index=i, t=2 + i / 10, frame=50 + i, status=Status.FAILED, observed="open")
              for i in range(1, 4)]
    anchors = [("doors", 8)] + [("doors", 50 + i) for i in range(1, 4)]
    size = data_uri_size(thumbs["doors", 0])
    # Room for the four anchors and two more: two strip frames, then a note.
    budget = 4 * max(data_uri_size(thumbs[k]) for k in anchors) + 2 * size + 10
    page = render_html(summary_of([clip, *single]), HtmlOptions(thumbnails=thumbs, budget_bytes=budget))
    data = page_data(page)
    rows = data["rows"]
    assert all(isinstance(row[10], int) for row in rows), "every failure has its picture"
    strip = rows[0][15]
    assert [f[1] for f in strip] == list(range(9)) and [f[3] for f in strip] == [False] * 8 + [True]
    embedded = [f for f in strip if f[2] is not None]
    assert 1 <= len(embedded) <= 3 and strip[-1][2] == rows[0][10]
    for time, frame, thumb, _anchor in embedded:
        assert decoded(base64.b64decode(data["thumbs"][thumb].split(",", 1)[1])) == frame
        assert time == pytest.approx(frame / 10)
    assert [row[15] for row in rows[1:]] == [None, None, None]
    assert "frame(s) of failed clips&#x27; filmstrips are shown by time and frame index only" in page
    # A frame that is both an anchor and a strip frame is embedded once.
    shared = clip_result([50, 51, 52], 2, t0=1.8)
    shared = dataclasses.replace(shared, sample_index=9)
    data = page_data(render_html(summary_of([*single, shared]), HtmlOptions(thumbnails=thumbs)))
    assert len(data["thumbs"]) == 4  # 51, 52, 53 and the clip's 50
    strip = next(row[15] for row in data["rows"] if row[15])
    assert [f[2] for f in strip[1:]] == [data["rows"][0][10], data["rows"][1][10]]


CASE = textwrap.dedent("""\
    video: bframes_h264.mp4
    targets:
      motion:
        samples:
        - at: [1.5, 1.9]
          expect: 0
          clip: {before_s: 1.2}
        - at: 0.5
          expect: 0
          clip: {before_s: 0.3, after_s: 0.2, every_s: 0.1}
    """)


def strips(page: Path) -> list[Any]:
    """Each row's strip as (time, frame, index read from the embedded picture, anchor)."""
    data = page_data(page.read_text())
    out = []
    for row in data["rows"]:
        strip = []
        for time, frame, thumb, anchor in row[15] or []:
            pixels = None if thumb is None else decoded(base64.b64decode(data["thumbs"][thumb].split(",", 1)[1]))
            strip.append((time, frame, pixels, anchor))
        out.append(strip)
    return out


@pytest.mark.frames
def test_report_rebuilds_the_runs_strips_from_saved_failures_or_the_videos(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE}, "def judge(sample, target):\n    return len(sample.frames)\n",
                         videos=("bframes_h264.mp4",))
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:judge",
                             "--html", tmp_path / "run.html", "--output-json", report, "--save-failures",
                             "--min-pass-rate", "1")
    assert code == 1, out + err
    from_run = strips(tmp_path / "run.html")
    results = read_json(report)["trials"][0]["results"]
    assert [len(s) for s in from_run] == [8, 8, 6]
    for strip, r in zip(from_run, results):
        clip = dict(zip(r["clip"]["timestamps"], r["clip"]["frame_indexes"]))
        assert all(clip[time] == frame == pixels for time, frame, pixels, _a in strip)
        assert [a for *_x, a in strip].count(True) == 1
    # From the JSON and the --save-failures clip folders alone.
    code, out, err = run_cli("report", report, "--html", tmp_path / "saved.html")
    assert code == 0, out + err
    assert strips(tmp_path / "saved.html") == from_run
    # From the videos, when no artifact is at hand.
    for r in results:
        Path(r["artifact_image"]).unlink()
        folder = Path(r["artifact_image"]).with_name(Path(r["artifact_image"]).stem + "_clip")
        for each in folder.iterdir():
            each.unlink()
    code, out, err = run_cli("report", report, "--html", tmp_path / "decoded.html", "--eval-dir", eval_dir)
    assert code == 0, out + err
    assert strips(tmp_path / "decoded.html") == from_run
