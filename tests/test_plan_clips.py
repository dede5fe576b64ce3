"""Clip frame selection (``plan.clips``) on the self-identifying fixture videos, and the
clip checks that planning, ``validate``, ``list-samples`` and ``run`` make.

Every clip is checked two ways: against the rule written independently from the
manifest's frame times, and against what the single-frame path decodes for each
requested time (the index read from the frame's own pixels, which also proves the
rotation or reflection was applied).
"""

from __future__ import annotations

import json
from array import array
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import FRAMECODE_ADAPTER, load_case, make_eval, run_cli
from framecode import read_frame_index

from glasskit_eval.cases.model import MAX_CLIP_FRAMES, ClipSpec
from glasskit_eval.errors import ValidationError
from glasskit_eval.plan.clips import (
    Clip,
    ClipEntry,
    edge_problem,
    grid_times,
    neighbour_frames,
    plan_clips,
    select_clip,
)
from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters, expand_case
from glasskit_eval.support.timevalues import format_time
from glasskit_eval.video._orientation import UPRIGHT
from glasskit_eval.video.frames import decode_at
from glasskit_eval.video.frametable import FrameTable, frame_table
from glasskit_eval.video.probe import END_TOLERANCE_S, info_from_table, probe

pytestmark = pytest.mark.frames

VIDEOS = Path(__file__).resolve().parent.parent / "fixtures" / "videos"
MANIFEST = json.loads((VIDEOS / "manifest.json").read_text())
F = Fraction


def manifest_times(name: str) -> list[Fraction]:
    return [Fraction(t) for t in MANIFEST[name]["frame_times"]]


def nearest(times: list[Fraction], want: Fraction) -> int:
    """The single-sample rule, written independently: nearest, ties to the earlier frame."""
    best = 0
    for i, t in enumerate(times):
        if abs(t - want) < abs(times[best] - want):
            best = i
    return best


def expected_entries(name: str, anchor: Fraction, spec: ClipSpec) -> list[tuple[Fraction, int]]:
    """(requested time, frame index) of the clip, from the manifest and the issue's words."""
    times = manifest_times(name)
    end = probe(VIDEOS / name).end_time + END_TOLERANCE_S
    if spec.every_s is not None:
        every = spec.every_s
        reach = int(max(spec.before_s, spec.after_s) / every) + 2
        steps = [j for j in range(-reach, reach + 1) if -spec.before_s <= j * every <= spec.after_s]
        wanted = [anchor + j * every for j in steps if 0 <= anchor + j * every <= end]
        return [(t, nearest(times, t)) for t in wanted]
    own = nearest(times, anchor)
    inside = [i for i, t in enumerate(times) if anchor - spec.before_s <= t <= anchor + spec.after_s]
    return [(anchor if i == own else times[i], i) for i in sorted({*inside, own})]


def decoded(name: str, times: tuple[Fraction, ...]) -> dict[Fraction, tuple[int, int, Fraction]]:
    """requested time -> (index read from the pixels, decoder's index, media time), one decode."""
    return {want: (read_frame_index(frame.image), frame.index, frame.media_time)
            for want, frame in decode_at(VIDEOS / name, times)}


def check_clip(name: str, anchor: Fraction, spec: ClipSpec) -> Clip:
    path = VIDEOS / name
    clip = select_clip(anchor, spec, frame_table(path), end_time=probe(path).end_time)
    assert [(e.time, e.frame_index) for e in clip.entries] == expected_entries(name, anchor, spec)
    assert list(clip.times) == sorted(clip.times), "entries are in time order"
    assert clip.entries[clip.anchor].time == anchor
    got = decoded(name, clip.times)
    for entry in clip.entries:
        pixels, index, media_time = got[entry.time]
        assert (pixels, index, media_time) == (entry.frame_index, entry.frame_index, entry.media_time), (
            f"{name} @ {entry.time}")
    return clip


# --- selection on real videos ---------------------------------------------------------------


def test_every_frame_window_is_closed_and_holds_the_anchor() -> None:
    # 10 fps: frames at 0.7 and 1.2 lie exactly on the window's edges and belong to it.
    clip = check_clip("cfr_h264.mp4", F(1), ClipSpec(before_s=F(3, 10), after_s=F(1, 5)))
    assert clip.frame_indexes == (7, 8, 9, 10, 11, 12)
    assert clip.times == (F(7, 10), F(8, 10), F(9, 10), F(1), F(11, 10), F(12, 10))
    assert clip.anchor == 3


def test_every_frame_window_with_no_frame_inside_is_the_anchor_frame() -> None:
    clip = check_clip("cfr_h264.mp4", F(104, 100), ClipSpec(before_s=F(1, 100), after_s=F(1, 100)))
    assert clip.entries == (ClipEntry(F(104, 100), 10, F(1)),)


def test_the_anchor_keeps_its_own_time_between_its_neighbours() -> None:
    clip = check_clip("cfr_h264.mp4", F(104, 100), ClipSpec(before_s=F(2, 10), after_s=F(2, 10)))
    assert clip.frame_indexes == (9, 10, 11, 12)
    assert clip.times == (F(9, 10), F(104, 100), F(11, 10), F(12, 10))


def test_a_grid_finer_than_the_video_repeats_frames_and_ties_go_earlier() -> None:
    clip = check_clip("cfr_h264.mp4", F(1), ClipSpec(before_s=F(2, 10), after_s=F(1, 10), every_s=F(1, 20)))
    assert clip.times == (F(8, 10), F(85, 100), F(9, 10), F(95, 100), F(1), F(105, 100), F(11, 10))
    # 0.85, 0.95 and 1.05 are exact ties: the earlier frame.
    assert clip.frame_indexes == (8, 8, 9, 9, 10, 10, 11)


def test_a_grid_coarser_than_the_video_skips_frames() -> None:
    clip = check_clip("cfr_h264.mp4", F(1), ClipSpec(before_s=F(1), after_s=F(1, 2), every_s=F(3, 10)))
    assert clip.times == (F(1, 10), F(4, 10), F(7, 10), F(1), F(13, 10))
    assert clip.frame_indexes == (1, 4, 7, 10, 13)


def test_the_grid_is_exact_where_floats_drift() -> None:
    # 0.1 * 3 is 0.30000000000000004 in floats: an accumulated or float grid would lose t - 0.3.
    times = grid_times(F(1), ClipSpec(before_s=F(3, 10), every_s=F(1, 10)))
    assert times == [F(7, 10), F(8, 10), F(9, 10), F(1)]


def test_an_exact_tie_on_the_30fps_fixture() -> None:
    # 0.05 is exactly halfway between frame 1 (1/30) and frame 2 (1/15).
    clip = check_clip("halfway_30fps.mp4", F(1, 10), ClipSpec(before_s=F(1, 20), every_s=F(1, 20)))
    assert clip.frame_indexes == (1, 3)


@pytest.mark.parametrize("spec", [
    ClipSpec(before_s=F(1, 2), after_s=F(1, 4)),
    ClipSpec(before_s=F(1, 2), after_s=F(1, 4), every_s=F(1, 50)),
    ClipSpec(before_s=F(1), after_s=F(1, 2), every_s=F(1, 5)),
], ids=["every-frame", "fine-grid", "coarse-grid"])
@pytest.mark.parametrize("name", ["vfr_h264.mp4", "bframes_h264.mp4", "start_offset_bframes_h264.mov",
                                  "open_gop_h264.mp4", "mpeg4_es.m4v", "h264.mkv"])
def test_vfr_b_frames_offsets_and_sequential_videos(name: str, spec: ClipSpec) -> None:
    check_clip(name, F(11, 10), spec)


@pytest.mark.parametrize("name", ["rotate90.mp4", "mirror.mp4", "mirror_rotate90.mp4", "rotate270.m4v"])
def test_rotation_and_reflection_are_applied_to_every_clip_frame(name: str) -> None:
    # read_frame_index refuses a frame that is not in display orientation.
    check_clip(name, F(1), ClipSpec(before_s=F(1, 2), after_s=F(3, 10)))
    check_clip(name, F(1), ClipSpec(before_s=F(1, 2), every_s=F(1, 4)))


def test_clamp_drops_times_before_the_first_frame() -> None:
    clip = check_clip("cfr_h264.mp4", F(1, 10), ClipSpec(before_s=F(1, 2), every_s=F(1, 10), edge="clamp"))
    assert clip.times == (F(0), F(1, 10)) and clip.frame_indexes == (0, 1)
    clip = check_clip("bframes_h264.mp4", F(1, 10), ClipSpec(before_s=F(1), edge="clamp"))
    assert clip.frame_indexes == (0, 1, 2)


def test_clamp_drops_times_past_the_end() -> None:
    # 2.0 s is the clip's end (last frame at 1.9 plus one frame); 2.05 is still within tolerance.
    clip = check_clip("cfr_h264.mp4", F(19, 10), ClipSpec(after_s=F(1), every_s=F(1, 20), edge="clamp"))
    assert clip.times == (F(19, 10), F(195, 100), F(2), F(205, 100))
    assert clip.frame_indexes == (19, 19, 19, 19)
    clip = check_clip("vfr_h264.mp4", F(23, 10), ClipSpec(after_s=F(5), before_s=F(1, 5), edge="clamp"))
    assert clip.frame_indexes[-1] == len(manifest_times("vfr_h264.mp4")) - 1


#: A last frame that lasts longer than the smallest gap (stts), and one no container duration
#: describes (MediaRecorder WebM: the gap before it): (fixture, where the clip ends).
LONG_LAST = [("vfr_long_last_h264.mp4", F(3, 2)), ("mediarecorder_vp8.webm", F("0.867"))]


@pytest.mark.parametrize(("name", "end"), LONG_LAST)
def test_a_clip_reaching_the_last_frames_own_end_is_taken(name: str, end: Fraction) -> None:
    last = len(manifest_times(name)) - 1
    anchor = manifest_times(name)[-1]
    assert probe(VIDEOS / name).end_time == end
    for reach in (end, end + END_TOLERANCE_S):
        spec = ClipSpec(before_s=F(1, 10), after_s=reach - anchor, every_s=(reach - anchor) / 4)
        assert edge_problem(anchor, spec, end) is None
        clip = check_clip(name, anchor, spec)  # the frames' own pixels say which they are
        assert clip.times[-1] == reach and clip.frame_indexes[-4:] == (last,) * 4
        every_frame = check_clip(name, anchor, ClipSpec(before_s=F(1, 10), after_s=reach - anchor))
        assert every_frame.frame_indexes[-1] == last


@pytest.mark.parametrize(("name", "end"), LONG_LAST)
def test_a_clip_just_beyond_the_end_and_its_tolerance_is_refused(name: str, end: Fraction) -> None:
    anchor = manifest_times(name)[-1]
    beyond = end + END_TOLERANCE_S + F(1, 1000)
    for spec in (ClipSpec(after_s=beyond - anchor), ClipSpec(after_s=beyond - anchor, every_s=beyond - anchor)):
        assert edge_problem(anchor, spec, probe(VIDEOS / name).end_time) == (
            f"the clip of the sample at {format_time(anchor)}s reaches {float(beyond)}s, past the end of the video "
            f"({float(end)}s from its first frame); shorten after_s, move the sample, or set `edge: clamp` "
            "to drop the times outside the video")


# --- tables without timestamps ---------------------------------------------------------------


def synthetic_table(count: int, *, timestamps: bool = True) -> FrameTable:
    """``count`` frames at 30 fps."""
    rate = F(30)
    step = int(90000 / rate)
    return FrameTable(
        path=Path("synthetic.mp4"), codec="h264", format_name="mov,mp4", width=16, height=16,
        time_base=F(1, 90000), average_rate=rate,
        pts=array("q", [i * step for i in range(count)] if timestamps else []),
        keyframes=(0,), seek_points=(0,), orientation=UPRIGHT, has_b_frames=False,
        packets_without_pts=0 if timestamps else count, packet_count=count, first_time=F(0),
        trusted=timestamps, reason="" if timestamps else f"{count} packets have no timestamp")


@pytest.mark.parametrize("spec", [ClipSpec(before_s=F(1, 2), after_s=F(1, 10)),
                                  ClipSpec(before_s=F(1, 2), every_s=F(1, 60)),
                                  ClipSpec(before_s=F(5), after_s=F(5), edge="clamp")])
def test_frames_without_timestamps_are_placed_at_index_over_rate(spec: ClipSpec) -> None:
    # What the sequential decode does for such videos (FrameClock's estimate).
    with_pts, without = synthetic_table(90), synthetic_table(90, timestamps=False)
    end = info_from_table(without).end_time
    assert end == info_from_table(with_pts).end_time
    assert select_clip(F(1), spec, without, end_time=end) == select_clip(F(1), spec, with_pts, end_time=end)


def test_neighbour_frames_without_timestamps_match_the_timed_table() -> None:
    with_pts, without = synthetic_table(90), synthetic_table(90, timestamps=False)
    assert neighbour_frames(0, 2, without) == neighbour_frames(0, 2, with_pts) == [
        ClipEntry(F(1, 30), 1, F(1, 30)), ClipEntry(F(2, 30), 2, F(2, 30))]
    assert [e.frame_index for e in neighbour_frames(89, 3, without)] == [86, 87, 88]


# --- neighbouring frames (--jitter-frames) ----------------------------------------------------


@pytest.mark.parametrize("name", ["cfr_h264.mp4", "vfr_h264.mp4", "bframes_h264.mp4", "start_offset_h264.mp4"])
def test_neighbour_frames_are_the_frames_their_times_decode_to(name: str) -> None:
    """Each neighbour's time selects it by the single-sample rule: the decode gives exactly those frames."""
    table = frame_table(VIDEOS / name)
    count = len(manifest_times(name))
    for index in (0, 1, count // 2, count - 1):
        entries = neighbour_frames(index, 2, table)
        assert [e.frame_index for e in entries] == [i for i in range(index - 2, index + 3)
                                                    if i != index and 0 <= i < count]
        got = decoded(name, tuple(e.time for e in entries))
        for entry in entries:
            assert got[entry.time][:2] == (entry.frame_index, entry.frame_index), (name, index, entry)
            assert entry.media_time == manifest_times(name)[entry.frame_index]


# --- planning: clips on scheduled samples, and their checks ----------------------------------


CLIP_CASE = """\
video: cfr_h264.mp4
sample_defaults:
  clip: {before_s: 0.3, every_s: 0.1}
targets:
  inherits:
    samples:
    - at: [0.5, 1.0]
      expect: 1
  target_default:
    sample_defaults:
      clip: {before_s: 0.2, after_s: 0.2}
    samples:
    - at: 1.0
      expect: 1
    - at: 1.5
      expect: 1
      clip: {after_s: 0.5, every_s: 0.25, edge: clamp}
  cleared:
    samples:
    - at: 1.0
      expect: 1
      clip: null
"""


def test_planning_gives_each_sample_its_inherited_overridden_or_cleared_clip(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CLIP_CASE})
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    samples = plan.cases[0].samples
    got = [(s.target.id, s.time, s.clip.frame_indexes if s.clip else None) for s in samples]
    assert got == [
        ("inherits", F(1, 2), (2, 3, 4, 5)),
        ("inherits", F(1), (7, 8, 9, 10)),
        ("target_default", F(1), (8, 9, 10, 11, 12)),
        ("target_default", F(3, 2), (15, 17, 19)),  # 2.0 is the end; 1.5 + 0.5 lands on the last frame
        ("cleared", F(1), None),
    ]
    for s in samples:
        if s.clip is not None:
            pixels = decoded("cfr_h264.mp4", s.clip.times)
            assert [pixels[t][0] for t in s.clip.times] == list(s.clip.frame_indexes)
            assert s.clip.entries[s.clip.anchor].time == s.time


def test_a_plan_without_clips_is_unchanged(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n"
                                         "    - range: [0, 2]\n      expect: 1\n"})
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    assert [s.clip for s in plan.cases[0].samples] == [None] * 4


def edge_problems(tmp_path: Path, blocks: str) -> list[str]:
    eval_dir = make_eval(tmp_path, {"a": "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n" + blocks})
    with pytest.raises(ValidationError) as info:
        build_plan(eval_dir, Filters(), allow_empty=False)
    case_file = eval_dir / "cases" / "a.yaml"
    messages = [str(p) for p in info.value.problems]
    assert all(m.startswith(f"{case_file}:") for m in messages), messages
    return [m.split(f"{case_file}:", 1)[1] for m in messages]


def test_a_clip_before_the_first_frame_is_an_error_at_the_block(tmp_path: Path) -> None:
    got = edge_problems(tmp_path, "    - expect: 1\n      at: [0.2, 0.3]\n      clip: {before_s: 0.5}\n")
    assert len(got) == 1, "one problem per block"
    assert got[0].startswith("5: targets.t.samples[0]: the clip of the sample at 0.2s starts at -0.3s, "
                             "before the video's first frame (0.0s)")
    assert "shorten before_s" in got[0] and "edge: clamp" in got[0] and "target 't'" in got[0]


def test_a_grid_before_the_first_frame_is_an_error(tmp_path: Path) -> None:
    got = edge_problems(tmp_path, "    - at: 0.2\n      expect: 1\n      clip: {before_s: 0.5, every_s: 0.1}\n")
    assert got[0].startswith("5: targets.t.samples[0]: the clip of the sample at 0.2s starts at -0.3s")


def test_a_clip_past_the_end_is_an_error_naming_the_limit(tmp_path: Path) -> None:
    got = edge_problems(tmp_path, "    - at: 0.5\n      expect: 1\n    - range: [1.0, 2.0]\n      every_s: 0.1\n      expect: 1\n"
                        "      clip: {after_s: 0.2, every_s: 0.1}\n")
    assert len(got) == 1
    assert got[0].startswith("7: targets.t.samples[1]: the clip of the sample at 1.9s reaches 2.1s, past the "
                             "end of the video (2.0s from its first frame); shorten after_s")
    assert "video cfr_h264.mp4" in got[0]


def test_clamp_accepts_what_error_refuses(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n"
                                         "    - range: [0.0, 2.0]\n      expect: 1\n"
                                         "      clip: {before_s: 0.5, after_s: 0.5, edge: clamp}\n"})
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    first, last = plan.cases[0].samples[0], plan.cases[0].samples[-1]
    assert first.clip is not None and first.clip.frame_indexes == (0, 1, 2, 3, 4, 5)
    assert last.time == F(3, 2)
    assert last.clip is not None and last.clip.frame_indexes == tuple(range(10, 20))
    text = (eval_dir / "cases" / "a.yaml").read_text()
    (eval_dir / "cases" / "a.yaml").write_text(text.replace(", edge: clamp", ""))
    with pytest.raises(ValidationError, match=r"starts at -0\.5s, before the video's first frame"):
        build_plan(eval_dir, Filters(), allow_empty=False)


def test_an_every_frame_clip_over_the_limit_is_an_error(tmp_path: Path) -> None:
    cases = tmp_path / "eval" / "cases"
    cases.mkdir(parents=True)
    path = cases / "long.yaml"
    path.write_text("video: long.mp4\ntargets:\n  t:\n    samples:\n    - at: [40, 60]\n      expect: 1\n"
                    "      clip: {before_s: 34.1, after_s: 0}\n")
    case, problems = load_case(path)
    assert case is not None and not problems
    table = synthetic_table(3000)  # 100 s at 30 fps
    samples, problems = plan_clips(case, expand_case(case), table, info_from_table(table).end_time, "long.mp4")
    # At 40 s the window [5.9, 40] holds 1,024 frames (6.0 ... 40.0 plus 5.9); at 60 s it holds 1,024 too.
    assert [s.clip is not None and len(s.clip) for s in samples] == [1024, 1024]
    path.write_text(path.read_text().replace("34.1", "34.2"))
    case, _ = load_case(path)
    assert case is not None
    samples, problems = plan_clips(case, expand_case(case), table, info_from_table(table).end_time, "long.mp4")
    assert len(problems) == 1
    assert str(problems[0]).startswith(
        f"{path}:5: targets.t.samples[0]: the clip of the sample at 40.0s holds 1027 frames of long.mp4, "
        f"more than the limit of {MAX_CLIP_FRAMES:,} per clip")


# --- the commands ------------------------------------------------------------------------------


def test_validate_reports_clip_problems_located(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n"
                                         "    - at: 1.9\n      expect: 1\n      clip: {after_s: 1}\n"
                                         "    - at: 1.0\n      expect: 1\n      clip: {every_s: 0}\n"})
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1
    case_file = eval_dir / "cases" / "a.yaml"
    # Parse problems come first: the case is refused before its video is read.
    assert f"- {case_file}:10: targets.t.samples[1].clip.every_s: clip every_s must be greater than 0" in out
    eval_dir = make_eval(tmp_path / "2", {"a": "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n"
                                               "    - at: 1.9\n      expect: 1\n      clip: {after_s: 1}\n"})
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1
    assert (f"- {eval_dir / 'cases' / 'a.yaml'}:5: targets.t.samples[0]: the clip of the sample at 1.9s "
            "reaches 2.9s, past the end of the video") in out


def test_list_samples_counts_clip_frames(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CLIP_CASE})
    code, out, err = run_cli("list-samples", "--eval-dir", eval_dir)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].split() == ["Case", "Target", "Time", "Expected", "Mode", "Field", "Ignored", "Source", "Clip"]
    # The cleared sample's Clip cell is blank, so its line ends with the Source column.
    assert [line.split()[-1] for line in lines[3:]] == ["4", "4", "5", "3", "at"]


def test_list_samples_without_the_video_marks_counts_it_cannot_know(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CLIP_CASE}, videos=())
    code, out, err = run_cli("list-samples", "--eval-dir", eval_dir)
    assert code == 0, err
    assert [line.split()[-1] for line in out.splitlines()[3:8]] == ["4", "4", "?", "≤3", "at"]
    assert "depend on a video that is not on this machine" in out


def test_run_takes_a_case_with_clips(tmp_path: Path) -> None:
    text = CLIP_CASE.replace("expect: 1", "expect: true").replace("video: cfr_h264.mp4\n", "video: cfr_h264.mp4\n"
                                                                  "sampling: {every_s: 0.5}\n")
    eval_dir = make_eval(tmp_path, {"a": text}, FRAMECODE_ADAPTER)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "0")
    assert code == 0, out + err
