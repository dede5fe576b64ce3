"""``--jitter-frames``: the control arm judged on the frames either side of each sample's frame.

The fixture video (10 fps, 20 frames) carries each frame's index in its pixels. The adapter says
``late`` when the frame it got is at or after its config's ``edge``; one label sits exactly on the
edge (1.5 s, frame 15), so one frame earlier its verdict flips: a planted knife edge. The adapter
logs every frame it is given, so the extra calls are checked frame by frame.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, make_eval, read_json, run_cli

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  late:
    samples:
    - at: [0.0, 0.5, 1.0]
      field: late
      expect: false
    - at: [1.5, 1.9]
      field: late
      expect: true
"""

ADAPTER = f"""
import json
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    edge = config.config.get("edge", 15)
    log = config.eval_dir / "calls.log"
    def evaluate(sample, target):
        try:
            seen = read_frame_index(sample.image)
        except ValueError:  # no frame code to read (a dimmed frame)
            seen = -1
        with open(log, "a") as f:
            f.write(json.dumps([sample.sample_index, sample.frame_index, seen, sample.timestamp_s]) + "\\n")
        return {{"late": seen >= edge}}
    return evaluate
"""

CONFIG = """\
arms:
  later: {adapter_config: {edge: 16}}
"""


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return make_eval(tmp_path, {"edge": CASE}, adapter=ADAPTER, config=CONFIG)


def calls(eval_dir: Path) -> list[tuple[int, int, int, float]]:
    path = eval_dir / "calls.log"
    found = [tuple(json.loads(line)) for line in path.read_text().splitlines()] if path.exists() else []
    path.unlink(missing_ok=True)
    return found  # type: ignore[return-value]


COUNTS = ("attempt_pass_rate", "evaluated_attempts", "passed_attempts", "failed_attempts", "error_attempts",
          "pass_rate_ci", "consistently_passed_samples", "consistently_failed_samples", "evaluated_samples")


def without_timing(report: dict[str, Any]) -> dict[str, Any]:
    """A report's verdicts, counts and gates: what jitter must not change."""
    return {"gates": report["gates"], "success": report["success"],
            "results": [(r.get("arm"), r["sample_index"], r["status"], r["frame_index"])
                        for t in report["trials"] for r in t["results"]],
            "summary": {k: report["summary"][k] for k in COUNTS},
            "by_target": {t: g["pass_rate_ci"] for t, g in report["by_target"].items()},
            "trial_gates": [t["gates"] for t in report["trials"]]}


def test_jitter_finds_the_planted_knife_edge_and_changes_no_pass_rate(eval_dir: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "plain.json", "--min-pass-rate", "1")
    assert code == 0, err
    plain_calls = calls(eval_dir)
    assert sorted(c[1] for c in plain_calls) == [0, 5, 10, 15, 19]
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "jitter.json", "--min-pass-rate", "1",
                             "--jitter-frames", "1")
    assert code == 0, err
    jitter_calls = calls(eval_dir)
    # The run's own calls, then one per neighbour: frame 0 and frame 19 have one neighbour each.
    extra = sorted((c[0], c[1], c[2]) for c in jitter_calls[5:])
    assert sorted(jitter_calls[:5]) == sorted(plain_calls)
    assert extra == [(0, 1, 1), (1, 4, 4), (1, 6, 6), (2, 9, 9), (2, 11, 11), (3, 14, 14), (3, 16, 16), (4, 18, 18)]
    # Each neighbour reaches the adapter at its own time (10 fps: index / 10).
    assert all(c[3] == pytest.approx(c[1] / 10) for c in jitter_calls[5:])
    report, plain = read_json(tmp_path / "jitter.json"), read_json(tmp_path / "plain.json")
    assert report["jitter"] == [{"case": "edge", "target": "late", "timestamp_s": 1.5, "frame_index": 15,
                                 "flipped_frames": [14]}]
    assert "jitter" not in plain
    assert without_timing(report) == without_timing(plain)
    assert report["summary"]["evaluated_attempts"] == 5
    block = out[out.index("Jitter (+/-1 frame,"):]
    assert "the adapter, 8 extra calls" in block
    assert "1 of 5 samples flip" in block
    assert "edge/late at 1.5s (frame 15): flips at frame 14" in block


def test_jitter_with_arms_evaluates_the_control_arm_only(eval_dir: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "arms.json", "--arm", "later",
                             "--arm", "control", "--control", "later", "--jitter-frames", "2")
    assert code == 0, err
    logged = calls(eval_dir)
    assert len(logged) == 10 + 16  # both arms' samples, then 2+2+4+4+4 neighbours... of the control only
    report = read_json(tmp_path / "arms.json")
    # `later` fails 1.5 s (frame 15 is before its edge): frames 16 and 17 pass, frames 13 and 14 agree.
    assert report["jitter"] == [{"case": "edge", "target": "late", "timestamp_s": 1.5, "frame_index": 15,
                                 "flipped_frames": [16, 17]}]
    assert {r["arm"] for r in report["trials"][0]["results"]} == {"later", "control"}
    assert report["arms"]["later"]["summary"]["evaluated"] == 5
    assert "arm later, 16 extra calls" in out


def test_jitter_of_a_perturbation_control_sees_the_perturbed_neighbours(eval_dir: Path, tmp_path: Path) -> None:
    # At a tenth of the brightness no frame code can be read, on the neighbours either.
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "dim.json", "--perturb",
                             "brightness:0.1", "--control", "brightness:0.1", "--jitter-frames", "1")
    assert code == 0, err  # no gate is set
    logged = calls(eval_dir)
    assert len(logged) == 5 + 8 and all(c[2] == -1 for c in logged)
    assert sorted(c[1] for c in logged[5:]) == [1, 4, 6, 9, 11, 14, 16, 18]
    report = read_json(tmp_path / "dim.json")
    # 1.5 s and 1.9 s fail in the dark, and so do their (dark) neighbours: nothing flips.
    assert [r["status"] for r in report["trials"][0]["results"]] == ["passed"] * 3 + ["failed"] * 2
    assert report["jitter"] == []
    assert "no verdict flips within +/-1 frames of 5 samples" in out


@pytest.mark.parametrize(("extra", "message"), [
    (("--jitter-frames", "0"), "--jitter-frames: must be greater than zero"),
    (("--jitter-frames", "31"), "must be at most 30"),
    (("--jitter-frames", "1", "--shard", "1/2", "--output-json", "s.json"), "--jitter-frames is not supported together with --shard"),
])
def test_bad_jitter_options_exit_2_before_any_call(eval_dir: Path, extra: tuple[str, ...], message: str) -> None:
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, *extra)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert not (eval_dir / "calls.log").exists()


BATCH_ADAPTER = ADAPTER.replace('''    return evaluate
''', '''    return Batch(evaluate)

class Batch:
    def __init__(self, one):
        self.one = one

    def evaluate_many(self, samples, target):
        with open(self_log(), "a") as f:
            f.write(json.dumps(len(samples)) + "\\n")
        return [self.one(s, target) for s in samples]
''').replace("def create_evaluator(config):", '''def self_log():
    return LOG

def create_evaluator(config):
    global LOG
    LOG = config.eval_dir / "batches.log"''')


def test_jitter_of_a_batch_adapter_sends_each_target_s_neighbours_in_one_call(eval_dir: Path, tmp_path: Path) -> None:
    (eval_dir / "adapter.py").write_text(BATCH_ADAPTER)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "batch.json", "--jitter-frames", "1")
    assert code == 0, err
    # One evaluate_many for the target's 5 samples, then one for its 8 neighbouring frames.
    assert (eval_dir / "batches.log").read_text().split() == ["5", "8"]
    assert sorted(c[1] for c in calls(eval_dir)[5:]) == [1, 4, 6, 9, 11, 14, 16, 18]
    assert read_json(tmp_path / "batch.json")["jitter"] == [
        {"case": "edge", "target": "late", "timestamp_s": 1.5, "frame_index": 15, "flipped_frames": [14]}]
