"""Frame locks end to end: ``validate --pin`` writes them, run and validate check them."""

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
    samples:
    - at: [0.0, 0.5, 1.0]
      field: index
      expect: 5
    - range: [1.2, 1.8]
      every_s: 0.2
      field: index
      expect: 14
  second:
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


def lines_of(lock: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in lock.read_text().splitlines()]


def pin(eval_dir: Path) -> str:
    code, out, err = run_cli("validate", "--eval-dir", eval_dir, "--pin")
    assert code == 0, out + err
    return out


def validate(eval_dir: Path, *extra: str) -> tuple[int, str]:
    code, out, err = run_cli("validate", "--eval-dir", eval_dir, *extra)
    return code, out + err


def test_pin_writes_a_sorted_line_oriented_lock(eval_dir: Path) -> None:
    out = pin(eval_dir)
    assert f"Pinned 7 samples of clip in {lock_of(eval_dir)}" in out
    header, *pins = lines_of(lock_of(eval_dir))
    assert header["frames_lock"] == 1 and header["video"] == "cfr_h264.mp4"
    assert set(header["decoder"]) == {"av", "ffmpeg", "codec"}  # type: ignore[arg-type]
    assert header["decoder"]["codec"] == "h264"  # type: ignore[index]
    assert [(p["target"], p["time"], p["frame_index"]) for p in pins] == [
        ("index", "0", 0), ("index", "1/2", 5), ("index", "1", 10), ("index", "6/5", 12),
        ("index", "7/5", 14), ("index", "8/5", 16), ("second", "1/2", 5)]
    assert pins[1]["display_size"] == [128, 72] and len(str(pins[1]["pixel_sha256"])) == 64
    assert pins[1]["pixel_sha256"] == pins[-1]["pixel_sha256"]
    for line in lock_of(eval_dir).read_text().splitlines():
        assert line == json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False)
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and "warning" not in text and "note" not in text
    # Pinning again changes nothing.
    before = lock_of(eval_dir).read_text()
    assert "re-pinned" not in pin(eval_dir)
    assert lock_of(eval_dir).read_text() == before


def test_reencoded_video_reports_each_moved_sample(eval_dir: Path) -> None:
    pin(eval_dir)
    reencode(VIDEOS / "cfr_h264.mp4", eval_dir / "cases" / "cfr_h264.mp4", rate=8, crf=35)
    code, text = validate(eval_dir)
    assert code == 0, text
    moved = [line for line in text.splitlines() if "now resolves to" in line]
    # At 8 fps: 0.5 s -> frame 4, 1.0 -> 8, 1.2 -> 10 (9.6 rounds up), 1.4 -> 11, 1.6 -> 13.
    expected = {("index", "0.5", 4, 5), ("index", "1.0", 8, 10), ("index", "1.2", 10, 12),
                ("index", "1.4", 11, 14), ("index", "1.6", 13, 16), ("second", "0.5", 4, 5)}
    assert len(moved) == len(expected)
    for target, time, new, old in expected:
        assert any(line.startswith("warning: clip.frames.lock: ") and f"{target} sample" in line
                   and f"at {time}s: now resolves to frame {new} " in line and f"(pinned: frame {old} " in line
                   and "re-encoded" in line for line in moved), (target, time)
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 1 and "Validation failed" in text
    assert "clip.yaml:" in text and "targets.index.samples[0]" in text and "validate --pin" in text
    # run warns the same way, and refuses with --strict-pins before calling the adapter.
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    assert code in (0, 1)
    assert sum("now resolves to" in line for line in err.splitlines()) == 6
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--strict-pins")
    assert code == 2 and "now resolves to frame 4" in err and "Pass rate" not in out
    # --pin accepts the new frames and says what it changed.
    out = pin(eval_dir)
    assert out.count("re-pinned:") >= 6
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and "warning" not in text


def test_time_edited_by_one_frame_is_reported(eval_dir: Path) -> None:
    pin(eval_dir)
    case = eval_dir / "cases" / "clip.yaml"
    case.write_text(case.read_text().replace("at: [0.0, 0.5, 1.0]", "at: [0.0, 0.6, 1.0]"))
    code, text = validate(eval_dir)
    assert code == 0
    edited = [line for line in text.splitlines() if "time edited" in line]
    assert edited == ["warning: clip.frames.lock: index sample 1 at 0.6s: time edited from 0.5s; now frame 6 "
                      "at 0.6s (pinned: frame 5 at 0.5s)"]
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 1 and "time edited from 0.5s" in text
    # An edit within the same frame keeps the pin valid.
    case.write_text(case.read_text().replace("at: [0.0, 0.6, 1.0]", "at: [0.0, 0.52, 1.0]"))
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and "time edited" not in text


def test_edited_pixel_hash_warns_and_strict_pins_refuses(eval_dir: Path) -> None:
    pin(eval_dir)
    lock = lock_of(eval_dir)
    header, *pins = lines_of(lock)
    header["decoder"]["av"] = "0.0.1"  # type: ignore[index]  # as pinned by an older PyAV

    def write(pins: list[dict[str, object]]) -> None:
        lock.write_text("".join(json.dumps(p, sort_keys=True) + "\n" for p in [header, *pins]))

    # Only the exact hash differs: a decoder's rounding, within tolerance. A note, never an error.
    pins[1]["pixel_sha256"] = "0" * 64
    write(pins)
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0, text
    assert "note: clip.frames.lock: index sample 1 at 0.5s: pixels of frame 5 at 0.5s changed slightly" in text
    assert "the decoder changed (PyAV 0.0.1" in text
    # The perceptual hash moved too: pixels changed beyond tolerance.
    pins[1]["phash"] = f"{int(str(pins[1]['phash']), 16) ^ 0xFFFF_FFFF:016x}"
    write(pins)
    code, text = validate(eval_dir)
    assert code == 0
    assert "warning: clip.frames.lock: index sample 1 at 0.5s: pixels of frame 5 at 0.5s changed beyond " \
           "tolerance (perceptual distance 32/64" in text
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 1 and "changed beyond tolerance" in text


def test_partial_pins_new_samples_and_damaged_locks(eval_dir: Path) -> None:
    code, out, err = run_cli("validate", "--eval-dir", eval_dir, "--pin", "--target", "second")
    assert code == 0, err
    assert [p["target"] for p in lines_of(lock_of(eval_dir))[1:]] == ["second"]
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and text.count("is not pinned; run `validate --pin`") == 6
    pin(eval_dir)
    assert len(lines_of(lock_of(eval_dir))) == 8
    # A removed target's pins are dropped at the next --pin.
    case = eval_dir / "cases" / "clip.yaml"
    case.write_text(case.read_text().split("  second:")[0])
    pin(eval_dir)
    assert {p["target"] for p in lines_of(lock_of(eval_dir))[1:]} == {"index"}
    lock_of(eval_dir).write_text(lock_of(eval_dir).read_text() + "{not json\n")
    code, text = validate(eval_dir)
    assert code == 1 and f"{lock_of(eval_dir)}:8" in text and "validate --pin" in text
    assert "Traceback" not in text


def test_no_lock_changes_nothing(eval_dir: Path) -> None:
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and "warning" not in text and "note" not in text
    assert not lock_of(eval_dir).exists()


def test_seed_pins_the_frames_it_labels_when_the_case_is_locked(eval_dir: Path) -> None:
    pin(eval_dir)
    case = eval_dir / "cases" / "clip.yaml"
    case.write_text(case.read_text() + "  draft:\n    samples:\n    - at: [0.3, 0.7]\n")
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0, out + err
    assert f"pinned the 2 seeded frames in {lock_of(eval_dir)}" in out
    pins = {(p["target"], p["time"]): p["frame_index"] for p in lines_of(lock_of(eval_dir))[1:]}
    assert pins[("draft", "3/10")] == 3 and pins[("draft", "7/10")] == 7
    assert len(pins) == 9
    code, text = validate(eval_dir, "--strict-pins")
    assert code == 0 and "not pinned" not in text and "warning" not in text


def test_case_pin_statuses_for_the_review_page(eval_dir: Path) -> None:
    from glasskit_eval.plan.pinning import case_pin_statuses
    from glasskit_eval.plan.planning import build_plan
    from glasskit_eval.plan.schedule import Filters

    def statuses() -> dict[tuple[str, int], str]:
        plan = build_plan(eval_dir, Filters(), allow_empty=False)
        return {k: v["status"] for k, v in case_pin_statuses(plan.cases[0]).items()}

    assert set(statuses().values()) == {"no_lock"}
    pin(eval_dir)
    assert set(statuses().values()) == {"ok"}
    reencode(VIDEOS / "cfr_h264.mp4", eval_dir / "cases" / "cfr_h264.mp4", rate=8, crf=35)
    now = statuses()
    assert now[("index", 1)] == "moved" and now[("second", 6)] == "moved"
    assert now[("index", 0)] in ("ok", "pixels_slightly_changed", "pixels_changed")

