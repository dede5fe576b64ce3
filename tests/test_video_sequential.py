"""The sequential decode path on real videos that take it: raw streams, edit-list cuts,
fragmented and truncated MP4s (frames carry their index in their pixels)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from fixturevideos import MANIFEST, VIDEOS
from framecode import read_frame_index

from glasskit_eval.video import damage, frames
from glasskit_eval.video.frames import decode_at, decode_sequential
from glasskit_eval.video.frametable import frame_table
from glasskit_eval.video.strategy import plan

pytestmark = pytest.mark.frames


@pytest.fixture(autouse=True)
def fresh_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    # Damage is reported once per video and process; each test starts with none reported.
    monkeypatch.setattr(damage, "_reported", set())


def shared_frame_times(name: str) -> tuple[list[Fraction], dict[Fraction, int]]:
    """Per pair of neighbouring frames, two requests nearer the first and two nearer the
    second: all four are settled when the second frame is decoded."""
    entry = MANIFEST[name]
    times = [Fraction(t) for t in entry["frame_times"]]
    codes = entry["frame_codes"]
    expected: dict[Fraction, int] = {}
    for i in range(len(times) - 1):
        a, b = times[i], times[i + 1]
        step = b - a
        for want, code in ((a + step / 5, codes[i]), (a + step / 4, codes[i]),
                           (b - step / 4, codes[i + 1]), (b - step / 5, codes[i + 1])):
            expected[want] = code
    return sorted(expected), expected


def drain_closing_each(items: object) -> dict[Fraction, int]:
    """Consume like the run loop does: read the frame, then close its image at once."""
    got: dict[Fraction, int] = {}
    for want, frame in items:  # type: ignore[attr-defined]
        got[want] = read_frame_index(frame.image)
        frame.image.close()
    return got


SEQUENTIAL_VIDEOS = ["mpeg4_es.m4v", "cut_preroll_h264.mov", "fragmented_cut_h264.mp4", "truncated_h264.mp4"]


@pytest.mark.parametrize("name", SEQUENTIAL_VIDEOS)
def test_two_times_on_one_frame_each_get_their_own_image(name: str) -> None:
    wanted, expected = shared_frame_times(name)
    messages: list[str] = []
    assert drain_closing_each(decode_sequential(VIDEOS / name, wanted, warn=messages.append)) == expected
    assert drain_closing_each(decode_at(VIDEOS / name, wanted, warn=messages.append)) == expected


@pytest.mark.parametrize("name", ["bframes_h264.mp4", "cut_preroll_h264.mov", "open_gop_h264.mp4"])
def test_parallel_plans_give_shared_frames_their_own_images(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frames, "available_cores", lambda: 4)
    wanted, expected = shared_frame_times(name)
    table = frame_table(VIDEOS / name)
    needed = sorted({table.select(w) for w in wanted})
    # These clips are too short for the cost model to cut on its own: force the cut, with
    # the decoders the patched core count allows.
    assert plan(table.keyframes, needed, mode="segments", cores=4).workers == 4
    assert drain_closing_each(decode_at(VIDEOS / name, wanted, mode="segments")) == expected
    # Sparse requests, two per frame, as seeks on parallel decoders.
    sparse = wanted[::8] + wanted[1::8]
    pieces = plan(table.keyframes, sorted({table.select(w) for w in sparse}), mode="segments", cores=4)
    assert len(pieces.pieces) > 1 and pieces.workers == 4
    got = drain_closing_each(decode_at(VIDEOS / name, sparse, mode="segments"))
    assert got == {w: expected[w] for w in sparse}
    assert table.trusted, table.reason


def test_a_raw_elementary_stream_is_decoded_sequentially() -> None:
    table = frame_table(VIDEOS / "mpeg4_es.m4v")
    assert not table.seekable
    got = drain_closing_each(decode_at(VIDEOS / "mpeg4_es.m4v", [Fraction(0), Fraction(1), Fraction(23, 12)]))
    assert got == {Fraction(0): 0, Fraction(1): 12, Fraction(23, 12): 23}


@pytest.mark.parametrize("name", ["truncated_h264.mp4", "fragmented_cut_h264.mp4"])
def test_a_truncated_mp4_delivers_its_last_decodable_frames(name: str) -> None:
    entry = MANIFEST[name]
    times = [Fraction(t) for t in entry["frame_times"]]
    last = times[-1]
    # A case whose samples are all at the very end.
    wanted = [last - Fraction(1, 100), last, last + Fraction(1, 30)]
    messages: list[str] = []
    got = [(w, f.index, read_frame_index(f.image)) for w, f in decode_at(VIDEOS / name, wanted,
                                                                        warn=messages.append)]
    assert [code for _w, _i, code in got] == [entry["frame_codes"][-1]] * 3
    assert [index for _w, index, _c in got] == [entry["frame_indices"][-1]] * 3
    assert len(messages) == 1 and "damaged or truncated" in messages[0]
    assert f"{entry['skipped_packets']} video packet could not be decoded" in messages[0]


def test_a_time_whose_nearest_frame_was_lost_is_named_in_the_warning() -> None:
    name = "truncated_h264.mp4"
    entry = MANIFEST[name]
    assert entry["frame_codes"][-3:] == [55, 56, 59]  # 57 cannot be decoded, 58 is not in the file
    messages: list[str] = []
    wanted = [Fraction(56, 30), Fraction(57, 30), Fraction(59, 30)]
    got = {w: read_frame_index(f.image) for w, f in decode_at(VIDEOS / name, wanted, warn=messages.append)}
    # 57/30 s belongs to frame 57; the nearest decodable frame is 56 (59 is further away).
    assert got == {Fraction(56, 30): 56, Fraction(57, 30): 56, Fraction(59, 30): 59}
    (message,) = messages
    assert "1 frame could not be decoded (at 1.9s)" in message
    assert "sample time 1.9s got the nearest decodable frame" in message


def test_damage_is_reported_once_per_video(capsys: pytest.CaptureFixture[str]) -> None:
    video = VIDEOS / "truncated_h264.mp4"
    for _ in range(2):
        for _w, frame in decode_at(video, [Fraction(1)]):
            frame.image.close()
        for _w, frame in decode_at(video, [Fraction(57, 30)]):
            frame.image.close()
    err = capsys.readouterr().err
    assert err.count("warning: ") == 1 and str(video) in err


def test_a_file_without_decodable_frames_is_a_video_error(tmp_path: Path) -> None:
    from glasskit_eval.errors import VideoError

    broken = tmp_path / "broken.m4v"
    data = (VIDEOS / "mpeg4_es.m4v").read_bytes()
    broken.write_bytes(data[:40])
    with pytest.raises(VideoError):
        list(decode_sequential(broken, [Fraction(0)], warn=lambda _m: None))


# --------------------------------------------------------------------------- through the CLI


@pytest.mark.parametrize("video", ["mpeg4_es.m4v", "cut_preroll_h264.mov", "fragmented_cut_h264.mp4"])
def test_export_frames_of_two_times_on_one_frame(tmp_path: Path, video: str) -> None:
    from evalkit import make_eval, run_cli
    from PIL import Image

    entry = MANIFEST[video]
    times = [Fraction(t) for t in entry["frame_times"]]
    # Two decimals nearest the same frame (21 of 24 at 12 fps, 1.74 and 1.75 of the issue).
    frame = len(times) * 7 // 8
    a, b = times[frame] - (times[frame] - times[frame - 1]) / 8, times[frame]
    case = f"video: {video}\ntargets:\n  t:\n    samples:\n    - at: 0\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, videos=(video,))
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "c",
                             "--at", str(float(a)), "--at", str(float(b)))
    assert code == 0, err
    paths = out.split()
    assert len(paths) == 2
    for path in paths:
        with Image.open(path) as image:
            assert read_frame_index(image) == entry["frame_codes"][frame]


@pytest.mark.parametrize("order", ["declaration", "time"])
def test_a_run_whose_samples_are_all_at_the_end_of_a_truncated_mp4(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], order: str) -> None:
    from evalkit import FRAMECODE_ADAPTER, make_eval, read_json, run_cli

    video = "truncated_h264.mp4"
    entry = MANIFEST[video]
    samples = "".join(f"    - at: {t}\n      expect: {code}\n" for t, code in
                      (("1.84", 55), ("1.87", 56), ("1.9", 56), ("1.97", 59), ("2.0", 59)))
    case = f"video: {video}\ntargets:\n  frame:\n    sample_defaults:\n      field: index\n    samples:\n{samples}"
    eval_dir = make_eval(tmp_path, {"c": case}, FRAMECODE_ADAPTER, videos=(video,))
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--min-pass-rate", "1",
                             "--order", order)
    assert code == 0, out + err
    results = read_json(report)["trials"][0]["results"]
    assert [r["status"] for r in results] == ["passed"] * 5
    assert [r["frame_index"] for r in results] == [55, 56, 56, 58, 58]  # frame 58 holds code 59
    assert entry["frame_indices"][-1] == 58
    # Said once, by the run's console under the case's heading, not straight to the process's stderr.
    heading, warning = out.splitlines()[:2]
    assert heading.startswith("Case c ") and out.count("warning: ") == 1, out
    assert "sample time 1.9s got the nearest decodable frame" in warning
    assert "damaged" not in err and "damaged" not in capsys.readouterr().err
