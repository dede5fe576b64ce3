"""Frame locks of clip samples: ``validate --pin`` pins every clip frame; ``--strict-pins`` refuses moved ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalkit import FRAMECODE_ADAPTER, VIDEOS, make_eval, run_cli
from reencode import reencode

pytestmark = pytest.mark.frames

CASE = """
video: cfr_h264.mp4
targets:
  index:
    sample_defaults:
      clip: {before_s: 0.4, every_s: 0.2}
    samples:
    - at: [0.5, 1.0]
      field: index
      expect: 5
    - at: 1.5
      clip: {before_s: 0.2, after_s: 0.1}
      field: index
      expect: 15
  single:
    samples:
    - at: 0.5
      field: index
      expect: 5
"""


@pytest.fixture
def eval_dir(tmp_path: Path) -> Path:
    return make_eval(tmp_path, {"clip": CASE}, FRAMECODE_ADAPTER)


def lock_of(eval_dir: Path) -> Path:
    return eval_dir / "cases" / "clip.frames.lock"


def pins_of(eval_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in lock_of(eval_dir).read_text().splitlines()[1:]]


def validate(eval_dir: Path, *extra: str) -> tuple[int, str]:
    code, out, err = run_cli("validate", "--eval-dir", eval_dir, *extra)
    return code, out + err


def clip_frames(pin: dict[str, object]) -> list[tuple[str, int]]:
    clip = pin["clip"]
    assert isinstance(clip, dict)
    return [(f["time"], f["frame_index"]) for f in clip["frames"]]


def test_pin_records_every_clip_frame_and_single_frame_lines_stay_as_they_were(eval_dir: Path) -> None:
    code, text = validate(eval_dir, "--pin")
    assert code == 0, text
    grid_early, grid_late, every_frame, single = pins_of(eval_dir)
    # 10 fps: the grid t-0.4, t-0.2, t; every frame of [1.3, 1.6] for the block's own clip.
    assert clip_frames(grid_early) == [("1/10", 1), ("3/10", 3), ("1/2", 5)]
    assert clip_frames(grid_late) == [("3/5", 6), ("4/5", 8), ("1", 10)]
    assert clip_frames(every_frame) == [("13/10", 13), ("7/5", 14), ("3/2", 15), ("8/5", 16)]
    assert every_frame["clip"] == {**every_frame["clip"], "before_s": "1/5", "after_s": "1/10",  # type: ignore[dict-item]
                                   "every_s": None, "edge": "error"}
    # The anchor's clip frame is the sample's own pinned frame, hashes and all.
    anchor = grid_early["clip"]["frames"][-1]  # type: ignore[index]
    assert (anchor["pixel_sha256"], anchor["phash"]) == (grid_early["pixel_sha256"], grid_early["phash"])
    assert single["target"] == "single" and set(single) == {
        "display_size", "frame_index", "media_time", "media_timestamp_s", "phash", "pixel_sha256",
        "sample_index", "target", "time", "timestamp_s"}
    assert single["pixel_sha256"] == grid_early["pixel_sha256"]
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and "warning" not in text and "note" not in text, text


def test_strict_pins_refuses_a_moved_clip_frame_at_its_block(eval_dir: Path) -> None:
    assert validate(eval_dir, "--pin")[0] == 0
    lock = lock_of(eval_dir)
    lines = lock.read_text().splitlines()
    # As if the clip frame asked at 0.8 s had been frame 7 when the label was made.
    second = json.loads(lines[2])
    second["clip"]["frames"][1].update(frame_index=7, media_time="7/10")
    lines[2] = json.dumps(second, sort_keys=True, ensure_ascii=False)
    lock.write_text("\n".join(lines) + "\n")
    code, text = validate(eval_dir)
    assert code == 0
    assert ("warning: clip.frames.lock: index sample 1 at 1.0s: clip frame at 0.8s now resolves to frame 8 "
            "at 0.8s (pinned: frame 7 at 0.7s); 1 of 3 clip frames moved") in text
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 1 and "Validation failed" in text
    assert "clip.yaml:8: targets.index.samples[0]: frame lock: index sample 1 at 1.0s: clip frame" in text
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--strict-pins")
    assert code == 2 and "clip frame at 0.8s now resolves to frame 8" in err and "Pass rate" not in out
    # --pin accepts the frames as they are now.
    code, text = validate(eval_dir, "--pin")
    assert code == 0 and "re-pinned: index sample 1 at 1.0s: clip frame at 0.8s" in text
    assert validate(eval_dir, "--strict-pins")[0] == 0


def test_a_reencoded_video_moves_clip_frames_around_an_anchor_that_stays(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": """
        video: cfr_h264.mp4
        targets:
          index:
            samples:
            - at: 0
              clip: {after_s: 0.3, every_s: 0.1}
              field: index
              expect: 0
        """}, FRAMECODE_ADAPTER)
    assert validate(eval_dir, "--pin")[0] == 0
    assert clip_frames(pins_of(eval_dir)[0]) == [("0", 0), ("1/10", 1), ("1/5", 2), ("3/10", 3)]
    # At 12 fps the first frame stays where it was; 0.1, 0.2 and 0.3 s get frames 1, 2 and 4 at new times.
    reencode(VIDEOS / "cfr_h264.mp4", eval_dir / "cases" / "cfr_h264.mp4", rate=12, crf=35)
    code, text = validate(eval_dir)
    assert code == 0
    warnings = [line for line in text.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: clip.frames.lock: index sample 0 at 0.0s: clip frame at 0.1s now resolves to "
                        "frame 1 at 0.083333s (pinned: frame 1 at 0.1s); 3 of 4 clip frames moved; the video "
                        "was re-encoded or replaced (its SHA-256 differs from the lock's)"]
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 1 and "clip.yaml:6: targets.index.samples[0]: frame lock:" in text and "Traceback" not in text
    assert validate(eval_dir, "--pin")[0] == 0
    assert clip_frames(pins_of(eval_dir)[0]) == [("0", 0), ("1/10", 1), ("1/5", 2), ("3/10", 4)]


def test_editing_a_clip_after_pinning_is_reported(eval_dir: Path) -> None:
    assert validate(eval_dir, "--pin")[0] == 0
    case = eval_dir / "cases" / "clip.yaml"
    case.write_text(case.read_text().replace("{before_s: 0.2, after_s: 0.1}", "{before_s: 0.3, after_s: 0.1}"))
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 1
    assert ("index sample 2 at 1.5s: clip edited from [t-0.2, t+0.1] every frame to [t-0.3, t+0.1] every "
            "frame; now 5 frames, 12..16 (1.2s..1.6s) (pinned: 4 frames, 13..16 (1.3s..1.6s))") in text
    # A clip added to a pinned single-frame sample is a note until pinned.
    case.write_text(case.read_text().replace("  single:\n    samples:\n    - at: 0.5\n",
                                             "  single:\n    samples:\n    - at: 0.5\n      clip: {before_s: 0.1}\n"))
    code, text = validate(eval_dir)
    assert "note: clip.frames.lock: single sample 3 at 0.5s: its clip of 2 frames is not pinned" in text
