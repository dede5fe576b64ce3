"""Arms with ``--repeat`` end to end: the paired comparison and ``--max-robustness-drop`` learn their
noise from the repeats, so a perturbation that breaks one contiguous stretch of video is seen.

The fixture video's frames carry their index in their pixels; the Python adapter passes every frame
whose code it can read, and on the frames it cannot (the ``brightness:0.5`` arm hides the codes)
fails only samples 6-13: one stretch of 8 of the 20 samples, in every trial alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, make_eval, read_json, run_cli

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0, 2]
      every_s: 0.1
      field: ok
      expect: true
"""

ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    def evaluate(sample, target):
        try:
            read_frame_index(sample.image)
        except ValueError:
            return {{"ok": not 6 <= sample.sample_index <= 13}}
        return {{"ok": True}}
    return evaluate
"""

ARM = "brightness:0.5"


def run(tmp_path: Path, name: str, *extra: str) -> tuple[int, str, dict[str, Any]]:
    eval_dir = tmp_path / "eval"
    if not eval_dir.exists():
        make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--perturb", ARM, "--max-robustness-drop", "0.2",
                             "--output-json", tmp_path / name, *extra)
    assert "Traceback" not in err
    return code, out, read_json(tmp_path / name)


def overall(report: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in report["arm_comparisons"] if c["target"] is None]
    assert found["arm"] == ARM and found["control"] == "control"
    return found


def test_with_repeats_a_stretch_one_arm_fails_is_significant_and_fails_the_robustness_gate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, report = run(tmp_path, "r3.json", "--repeat", "3")
    assert code == 1, out
    statuses = [(r["arm"], r["sample_index"], r["status"]) for t in report["trials"] for r in t["results"]]
    assert len(statuses) == 3 * 2 * 20
    assert {i for arm, i, status in statuses if status == "failed"} == set(range(6, 14))
    assert all(arm == ARM for arm, _i, status in statuses if status == "failed")
    comparison = overall(report)
    # The trials always agree: no noise, so the two-sided McNemar mid-p of 8 drops and no gains.
    assert comparison["noise_source"] == "repeats"
    assert comparison["method"] == "two-sided McNemar mid-p, counts scaled to the null variance the repeats estimate"
    assert comparison["delta_pass_rate"] == pytest.approx(-8 / 20)
    assert comparison["p_value"] == pytest.approx(0.5 ** 8) and comparison["significant"] is True
    gate = next(g for g in report["gates"] if g["name"] == f"{ARM}/max_robustness_drop")
    assert gate["passed"] is False
    assert gate["message"] == ("pass rate 40.0% below control (one-sided p = 0.00195, noise from the repeats; "
                               "gate: no significant drop beyond 20.0%)")
    assert "Arms (same frames; each compared with control, paired, noise from the repeats; * significant):" in out
    # A drop within the limit passes the same gate.
    code, out, within = run(tmp_path, "within.json", "--repeat", "3", "--max-robustness-drop", "0.45")
    assert code == 0, out
    assert [g["passed"] for g in within["gates"] if g["name"].endswith("max_robustness_drop")] == [True]


def test_without_repeats_the_noise_comes_from_the_differences_and_the_stretch_hides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, report = run(tmp_path, "r1.json")
    assert code == 0, out  # the documented conservative default: the stretch inflates its own noise
    comparison = overall(report)
    assert comparison["noise_source"] == "differences"
    assert comparison["delta_pass_rate"] == pytest.approx(-8 / 20) and comparison["significant"] is False
    gate = next(g for g in report["gates"] if g["name"] == f"{ARM}/max_robustness_drop")
    assert gate["passed"] is True and "noise from" not in gate["message"]
    assert "Arms (same frames; each compared with control, paired; * significant):" in out
