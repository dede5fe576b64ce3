"""``export-frames --target``: a clip sample's every frame, named by time and frame index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from evalkit import make_eval, run_cli
from framecode import read_frame_index
from PIL import Image

pytestmark = pytest.mark.frames

BFRAMES = """
video: bframes_h264.mp4
targets:
  gesture:
    sample_defaults:
      clip: {before_s: 0.2, every_s: 0.1}
    samples:
    - at: 1.0
      expect: wave
    - at: 0.4
      clip: {before_s: 0.08, every_s: 0.02}
      expect: none
    - at: 1.5
      clip: null
    - at: 1.96
      clip: {after_s: 0.2, every_s: 0.04, edge: clamp}
"""

ROTATED = """
video: rotate90.mp4
targets:
  fall:
    samples:
    - at: 1.5
      clip: {before_s: 0.2, after_s: 0.1}
      expect: false
"""


@pytest.fixture
def eval_dir(tmp_path: Path) -> Path:
    return make_eval(tmp_path, {"b": BFRAMES, "r": ROTATED}, videos=("bframes_h264.mp4", "rotate90.mp4"))


def exported(out: str) -> list[tuple[str, int, int]]:
    """(file name, frame index in the name, frame index the pixels carry) of each printed path."""
    rows = []
    for line in out.splitlines():
        path = Path(line)
        match = re.fullmatch(r"at-[0-9.]+s-frame-(\d+)\.png", path.name)
        with Image.open(path) as image:
            rows.append((path.name, int(match.group(1)) if match else -1, read_frame_index(image)))
    return rows


def test_a_clip_sample_exports_every_frame_named_by_time_and_index(eval_dir: Path) -> None:
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "b", "--target", "gesture",
                             "--at", "1.0", "--at", "0.4", "--at", "1.5", "--at", "1.0")
    assert code == 0, err
    rows = exported(out)
    # 25 fps: 0.9 s is halfway between frames 22 and 23 and gets the earlier one.
    assert rows[:3] == [("at-0.8s-frame-20.png", 20, 20), ("at-0.9s-frame-22.png", 22, 22),
                        ("at-1.0s-frame-25.png", 25, 25)]
    # A grid finer than the video repeats frames, one file per requested time.
    assert rows[3:8] == [("at-0.32s-frame-8.png", 8, 8), ("at-0.34s-frame-8.png", 8, 8),
                         ("at-0.36s-frame-9.png", 9, 9), ("at-0.38s-frame-9.png", 9, 9),
                         ("at-0.4s-frame-10.png", 10, 10)]
    # A sample without a clip keeps today's name; a repeated --at is exported once.
    assert rows[8:] == [("at-1.5s.png", -1, 37)]
    folder = eval_dir / "runs" / "frames" / "b"
    assert sorted(p.name for p in folder.iterdir()) == sorted(name for name, _, _ in rows)


def test_clamped_and_every_frame_clips_on_a_rotated_video(eval_dir: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "b", "--target", "gesture",
                             "--at", "1.96", "--output-dir", tmp_path / "clamped")
    assert code == 0, err
    # The last frame starts at 1.96 s; the grid past the video's end (2.0 s, plus the 0.05 s
    # tolerance sample times get) is dropped.
    assert [(i, px) for _, i, px in exported(out)] == [(49, 49)] * 3
    assert [Path(p).name for p in out.splitlines()] == ["at-1.96s-frame-49.png", "at-2.0s-frame-49.png",
                                                        "at-2.04s-frame-49.png"]
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "r", "--target", "fall",
                             "--at", "1.5")
    assert code == 0, err
    rows = exported(out)
    assert [(i, px) for _, i, px in rows] == [(13, 13), (14, 14), (15, 15), (16, 16)]
    with Image.open(out.splitlines()[0]) as image:
        assert image.size == (128, 72)  # stored 72x128: display orientation, as adapters get it


def test_without_target_times_are_single_frames_and_bad_times_are_refused(eval_dir: Path) -> None:
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "b", "--at", "1.0")
    assert code == 0, err
    assert [Path(p).name for p in out.splitlines()] == ["at-1.0s.png"]
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "b", "--target", "gesture",
                             "--at", "1.1")
    assert code == 2 and "--at 1.1 is not a scheduled sample time in case 'b'" in err and "Traceback" not in err
    code, out, err = run_cli("export-frames", "--eval-dir", eval_dir, "--case", "b", "--target", "nope",
                             "--at", "1.0")
    assert code == 2 and "nope" in err and "gesture" in err and "Traceback" not in err
