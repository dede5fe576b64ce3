"""``validate`` and ``run`` on a time at the last frame's own end (timestamp plus the duration
the container gives it, else the gap before it): accepted, and it gets the last frame, read
from the frame's pixels; a time just past the end's tolerance is the located error it always was.

``vfr_long_last_h264.mp4``: last frame at 11/15 s lasting 23/30 s (``stts``), so the clip ends at
1.5 s. ``mediarecorder_vp8.webm``: last frame at 0.617 s, no durations anywhere, 250 ms after the
frame before it, so the clip ends at 0.867 s. Both were refused before, as their ends were put
one smallest gap after the last frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, make_eval, read_json, run_cli
from fixturevideos import MANIFEST

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

#: Reports the index read from the pixels of the sample's frame, or of each clip frame.
ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Reader()

class Reader:
    def evaluate(self, sample, target):
        if sample.is_clip:
            return {{"index": [read_frame_index(f.image) for f in sample.frames],
                     "frame_index": [f.frame_index for f in sample.frames]}}
        return {{"index": read_frame_index(sample.image), "frame_index": sample.frame_index}}
"""

#: (fixture, the clip's end as a case file writes it, the end plus the 0.05 s tolerance and 1 ms).
ENDS = [("vfr_long_last_h264.mp4", "1.5", "1.551"), ("mediarecorder_vp8.webm", "0.867", "0.918")]


def last_index(video: str) -> int:
    return int(MANIFEST[video]["frame_count"]) - 1


def single_case(video: str, times: str) -> str:
    return (f"video: {video}\ntargets:\n  frame:\n    sample_defaults:\n      field: index\n    samples:\n"
            f"    - at: {times}\n      expect: {last_index(video)}\n")


def run_results(eval_dir: Path, tmp_path: Path) -> list[dict[str, Any]]:
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--min-pass-rate", "1")
    assert code == 0, out + err
    results: list[dict[str, Any]] = read_json(report)["trials"][0]["results"]
    return results


@pytest.mark.parametrize(("video", "end", "beyond"), ENDS)
def test_a_sample_at_the_last_frames_own_end_gets_the_last_frame(tmp_path: Path, video: str, end: str,
                                                                 beyond: str) -> None:
    eval_dir = make_eval(tmp_path, {"c": single_case(video, f"[{end}, {float(end) + 0.05}]")}, ADAPTER,
                         videos=(video,))
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 0, out + err
    results = run_results(eval_dir, tmp_path)
    assert [(r["observed"]["index"], r["observed"]["frame_index"], r["frame_index"]) for r in results] == \
        [(last_index(video),) * 3] * 2


@pytest.mark.parametrize(("video", "end", "beyond"), ENDS)
def test_a_sample_just_beyond_the_end_is_a_located_error(tmp_path: Path, video: str, end: str,
                                                         beyond: str) -> None:
    eval_dir = make_eval(tmp_path, {"c": single_case(video, beyond)},
                         "raise SystemExit('the adapter must not load')\n", videos=(video,))
    problem = (f"{eval_dir / 'cases' / 'c.yaml'}:7: targets.frame.samples[0]: sample time {beyond}s is past "
               f"the end of the video {video} ({end}s from its first frame); shorten the range or fix the time")
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and problem in out, out
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and problem in err and "Traceback" not in err, err


def clip_case(video: str, at: str, clip: str) -> str:
    # Every grid time from the anchor to the end is nearest the last frame.
    return (f"video: {video}\ntargets:\n  motion:\n    sample_defaults:\n      field: index\n    samples:\n"
            f"    - at: {at}\n      clip: {clip}\n      expect: {[last_index(video)] * 4}\n")


#: (fixture, anchor, a clip reaching exactly the end, the same clip 1 ms past the end's tolerance).
CLIPS = [("vfr_long_last_h264.mp4", "1.0", "{before_s: 0.25, after_s: 0.5, every_s: 0.25}", "{after_s: 0.551}"),
         ("mediarecorder_vp8.webm", "0.667", "{before_s: 0.1, after_s: 0.2, every_s: 0.1}", "{after_s: 0.251}")]


@pytest.mark.parametrize(("video", "at", "clip", "beyond"), CLIPS)
def test_a_clip_reaching_the_end_is_taken_and_one_beyond_is_refused(tmp_path: Path, video: str, at: str,
                                                                    clip: str, beyond: str) -> None:
    eval_dir = make_eval(tmp_path, {"c": clip_case(video, at, clip)}, ADAPTER, videos=(video,))
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 0, out + err
    (result,) = run_results(eval_dir, tmp_path)
    assert result["observed"]["index"] == result["observed"]["frame_index"] == [last_index(video)] * 4
    assert result["clip"]["frame_indexes"] == [last_index(video)] * 4

    (eval_dir / "cases" / "c.yaml").write_text(clip_case(video, at, beyond))
    code, out, _ = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and f"{eval_dir / 'cases' / 'c.yaml'}:7: targets.motion.samples[0]: the clip of the sample " \
        f"at {at}s reaches" in out and "past the end of the video" in out, out
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "targets.motion.samples[0]: the clip of the sample" in err, err
