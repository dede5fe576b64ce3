"""Arms end to end: three arms (two Python configs and a command adapter) on one real decode.

The fixture video's frames carry their index in their pixels; the adapter reads it and fails the
frames its config lists, so every arm's outcomes are known and each figure is recomputed here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, TESTS, make_eval, read_json, run_cli

from glasskit_eval.evaluation import case as case_module
from glasskit_eval.statistics.intervals import pass_rate_interval
from glasskit_eval.statistics.paired import holm
from glasskit_eval.statistics.sidebyside import paired_difference_test

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
from PIL import ImageStat

def create_evaluator(config):
    fail = set(config.config.get("fail", []))
    def evaluate(sample, target):
        try:
            seen = read_frame_index(sample.image)
        except ValueError:
            seen = None
        return {{"ok": seen is not None and seen not in fail, "seen": seen,
                 "mean": ImageStat.Stat(sample.image.convert("L")).mean[0]}}
    return evaluate
"""

SERVER = ROOT / "glasskit_eval" / "protocol_server.py"
CONFIG = f"""\
arms:
  small: {{adapter_config: {{fail: [3, 7, 10, 11, 12, 13]}}}}
  cmd:
    adapter_command: '{sys.executable} {SERVER} eval/adapter.py:create_evaluator'
    adapter_config: {{fail: [0, 3, 7]}}
  dim: {{perturb: [{{brightness: 0.5}}]}}
"""

FAILING = {"small": {3, 7, 10, 11, 12, 13}, "large": {7}, "cmd": {0, 3, 7}}
THREE = ("--arm", "small", "--arm", "large=large.yaml", "--arm", "cmd", "--control", "small")


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    (tmp_path / "large.yaml").write_text("fail: [7]\n")
    path = make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER, config=CONFIG)
    (path / "adapter.yaml").write_text("fail: [3, 7]\n")
    return path


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every frame the engine decodes (the real decoder, counted)."""
    frames: list[int] = []
    real = case_module.decode_at

    def counting(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for want, frame in real(*args, **kwargs):
            frames.append(frame.index)
            yield want, frame

    monkeypatch.setattr(case_module, "decode_at", counting)
    return frames


def outcomes(arm: str) -> list[float]:
    return [0.0 if i in FAILING[arm] else 1.0 for i in range(20)]


def by_arm(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for r in report["trials"][0]["results"]:
        found.setdefault(r["arm"], []).append(r)
    return found


def test_three_arms_share_one_decode_and_compare_as_computed_by_hand(eval_dir: Path, tmp_path: Path,
                                                                       decoded: list[int]) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "three.json", "--junit-xml", "j.xml",
                             *THREE)
    assert code == 0, err
    three_decodes = sorted(decoded)
    decoded.clear()
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "plain.json")
    assert code == 0, err
    # One decode for three arms: exactly the frames a plain run decodes, each once.
    assert three_decodes == sorted(decoded) == list(range(20))
    report = read_json(tmp_path / "three.json")
    results = by_arm(report)
    assert list(results) == ["small", "large", "cmd"]  # the control first; no plain adapter run
    for arm, mine in results.items():
        # Every arm got the same frames, and each frame was the one its index says.
        assert [r["frame_index"] for r in mine] == list(range(20))
        assert [r["observed"]["seen"] for r in mine] == list(range(20))
        assert [r["status"] == "failed" for r in mine] == [i in FAILING[arm] for i in range(20)]
        summary = report["arms"][arm]["summary"]
        assert summary["passed"] == 20 - len(FAILING[arm]) and summary["evaluated"] == 20
        interval = pass_rate_interval([outcomes(arm)])
        assert interval is not None and summary["pass_rate_ci"] == interval.to_json()
        assert report["arms"][arm]["by_target"]["ok"]["pass_rate"] == summary["pass_rate"]
    assert report["arms"]["large"]["spec"] == {"adapter_config": str(tmp_path / "large.yaml")}
    assert report["arms"]["cmd"]["spec"]["adapter_command"].endswith("eval/adapter.py:create_evaluator")
    overall = {c["arm"]: c for c in report["arm_comparisons"] if c["target"] is None}
    assert set(overall) == {"large", "cmd"} and all(c["control"] == "small" for c in overall.values())
    assert overall["large"]["delta_pass_rate"] == pytest.approx(5 / 20)
    assert overall["cmd"]["delta_pass_rate"] == pytest.approx(3 / 20)
    raw = {}
    for arm in ("large", "cmd"):
        test = paired_difference_test([list(zip(outcomes("small"), outcomes(arm)))])
        assert test is not None
        raw[arm] = test.p_value_raw
        assert overall[arm]["p_value_raw"] == pytest.approx(test.p_value_raw)
        assert overall[arm]["ci"] == {"low": pytest.approx(test.low), "high": pytest.approx(test.high)}
    assert [overall[a]["p_value"] for a in ("large", "cmd")] == pytest.approx(holm([raw["large"], raw["cmd"]]))
    assert [(f["timestamp_s"], f["control_status"], f["arm_status"]) for f in overall["cmd"]["flips"]] == [
        (0.0, "passed", "failed"), (1.0, "failed", "passed"), (1.1, "failed", "passed"), (1.2, "failed", "passed"),
        (1.3, "failed", "passed")]
    assert len(overall["large"]["flips"]) == 5
    # Nobody matches large's pass rate, so it is on the front whatever the latencies were.
    assert "large" in report["pareto"] and set(report["pareto"]) <= {"small", "large", "cmd"}
    # Console: the side-by-side table; JUnit: each arm's suites.
    table = out[out.index("Arms (same frames"):].splitlines()
    assert table[1].split()[0] == "Arm" and [line.split()[0] for line in table[2:5]] == ["small", "large", "cmd"]
    assert max(len(line) for line in table) <= 100
    junit = (tmp_path / "j.xml").read_text()
    for arm in ("small", "large", "cmd"):
        assert f'<testsuite name="{arm}: clip / ok" tests="20" failures="{len(FAILING[arm])}"' in junit
    plain = read_json(tmp_path / "plain.json")
    assert "arms" not in plain and "arm" not in plain["trials"][0]["results"][0]


def test_gates_apply_per_arm_unless_one_arm_is_gated(eval_dir: Path, tmp_path: Path) -> None:
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "g.json", "--min-pass-rate", "0.9",
                              *THREE)
    assert code == 1
    gates = {g["name"]: g["passed"] for g in read_json(tmp_path / "g.json")["trials"][0]["gates"]}
    assert gates == {"small/adapter_errors": True, "small/eval_min_pass_rate": False,
                     "large/adapter_errors": True, "large/eval_min_pass_rate": True,
                     "cmd/adapter_errors": True, "cmd/eval_min_pass_rate": False}
    assert "small/eval_min_pass_rate" in out
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "one.json", "--min-pass-rate",
                               "0.9", "--gate-arm", "large", *THREE)
    assert code == 0
    report = read_json(tmp_path / "one.json")
    assert [g["name"] for g in report["trials"][0]["gates"]] == ["large/adapter_errors", "large/eval_min_pass_rate"]
    assert report["success"] is True


def test_perturbation_arm_is_deterministic_and_gated_on_a_significant_drop(eval_dir: Path, tmp_path: Path) -> None:
    args = ("run", "--eval-dir", eval_dir, "--arm", "dim", "--perturb", "jpeg:60", "--seed", "7",
            "--max-robustness-drop", "0.2")
    code, _out, err = run_cli(*args, "--output-json", "p1.json")
    assert code == 1, err  # dim at half brightness hides the frame codes: every sample fails
    again, _out, _err = run_cli(*args, "--output-json", "p2.json")
    first, second = read_json(tmp_path / "p1.json"), read_json(tmp_path / "p2.json")
    results = by_arm(first)
    assert list(results) == ["control", "dim", "jpeg:60"]
    control_means = [r["observed"]["mean"] for r in results["control"]]
    dim_means = [r["observed"]["mean"] for r in results["dim"]]
    assert all(d == pytest.approx(c * 0.5, abs=1.0) for c, d in zip(control_means, dim_means))
    # The same pixels on a rerun.
    assert [r["observed"] for r in by_arm(second)["dim"]] == [r["observed"] for r in results["dim"]]
    assert [r["observed"] for r in by_arm(second)["jpeg:60"]] == [r["observed"] for r in results["jpeg:60"]]
    gates = {g["name"]: g["passed"] for g in first["gates"]}
    assert gates == {"dim/max_robustness_drop": False, "jpeg:60/max_robustness_drop": True}
    assert first["arms"]["dim"]["spec"] == {"perturb": "brightness:0.5"}


@pytest.mark.parametrize(("extra", "message"), [
    (("--arm", "smal"), "--arm smal: unknown arm; did you mean 'small'?"),
    (("--arm", "x=missing.yaml"), "arm 'x': adapter config"),
    (("--perturb", "blurr:2"), "did you mean 'blur'?"),
    (("--arm", "small", "--gate-arm", "cmd"), "--gate-arm cmd: not a selected arm"),
    (("--control", "small"), "--control needs arms"),
    (("--perturb", "jpeg:300"), "jpeg takes a JPEG quality from 1 to 95, got 300"),
    # Pillow refuses such a radius only when the arm's first frame is blurred, after the control's calls.
    (("--perturb", "blur:1e300"), "--perturb: blur:1e300: blur takes a blur radius in pixels greater than 0, "
                                  "at most 10000, got 1e+300"),
    (("--perturb", "contrast:1e300"), "contrast takes a contrast factor from 0 to 100, got 1e+300"),
    (("--perturb", "brightness:101"), "brightness takes a brightness factor from 0 to 100, got 101"),
])
def test_a_bad_arm_exits_2_before_any_call(eval_dir: Path, tmp_path: Path, extra: tuple[str, ...],
                                           message: str) -> None:
    (eval_dir / "adapter.py").write_text(ADAPTER + "\nopen(__file__ + '.called', 'w').close()\n")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, *extra)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert not (eval_dir / "adapter.py.called").exists()


def test_a_perturbation_out_of_range_in_config_is_located_and_refused_before_any_call(eval_dir: Path) -> None:
    (eval_dir / "adapter.py").write_text(ADAPTER + "\nopen(__file__ + '.called', 'w').close()\n")
    with (eval_dir / "config.yaml").open("a") as config:
        config.write("  hot: {perturb: [{jpeg: 30}, {blur: 1.0e+300}]}\n")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "hot")
    assert code == 2, err
    assert (f"{eval_dir / 'config.yaml'}:7: arms.hot.perturb[1]: perturb item: blur takes a blur radius in pixels "
            "greater than 0, at most 10000, got 1e+300") in err
    assert "Traceback" not in err and not (eval_dir / "adapter.py.called").exists()


def test_a_missing_command_adapter_is_refused_before_any_call(eval_dir: Path) -> None:
    config = CONFIG.replace(f"'{sys.executable} {SERVER}", "'no-such-program-xyz")
    (eval_dir / "config.yaml").write_text(config)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "small", "--arm", "cmd")
    assert code == 2
    assert "arm 'cmd': adapter_command program 'no-such-program-xyz' not found" in err
    assert json.dumps(err)  # printable, no traceback
    assert "Traceback" not in err



def test_arms_are_never_pooled_and_a_perturbation_is_no_candidate(eval_dir: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--arm", "small", "--perturb", "jpeg:30",
                              "--output-json", "r.json", "--annotations", "github", "--repeat", "2")
    assert code == 0, out
    report = read_json(tmp_path / "r.json")
    summary = report["summary"]
    # The headline is the control's own (the plain adapter fails frames 3 and 7 of 20), not 60 pooled samples.
    assert summary["arm"] == "control"
    assert (summary["evaluated_attempts"], summary["passed_attempts"]) == (40, 36)
    assert summary["pass_rate_ci"] == pass_rate_interval([[0.0 if i in (3, 7) else 1.0 for i in range(20)]]).to_json()
    assert report["by_target"]["ok"]["pass_rate_ci"]["effective_samples"] <= 20
    assert "Attempts: 40 evaluated, 36 passed, 4 failed" in out and "Arm: control (the control" in out
    assert "120 evaluated" not in out
    # The job summary too: the control's figures, and each arm's failing sample on its own row.
    job = (tmp_path / "summary.md").read_text()
    assert "1 cases, 2 trials (arm control, the control; each arm's figures are its own): 40 evaluated" in job
    assert "| `[small] clip` | `ok` | 1s | failed (2/2) |" in job and "(4/2)" not in job and "(6/2)" not in job
    # jpeg:30 passes as often as the control at the same latency class, but it is a condition.
    assert "jpeg:30" not in report["pareto"]
    assert report["arms"]["jpeg:30"]["summary"]["passed"] == 36
    # compare of two arms reports: their control arms, not every arm taken for a repeat of one sample.
    code, out, _err = run_cli("compare", "r.json", "r.json", "--output-json", "diff.json")
    assert code == 0, out
    diff = read_json(tmp_path / "diff.json")
    assert diff["matched_samples"] == 20 and diff["significance"]["noise_source"] == "repeats"
    assert diff["significance"]["delta_pass_rate"] == 0.0
