"""``run --early-stop`` through the real CLI: a Python adapter replays pre-drawn outcomes (keyed by
sample time) on a synthetic 240 s video sampled every 0.1 s (2,400 samples)."""

from __future__ import annotations

import json
import random
import re
import signal
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from earlystopkit import burst_outcomes, calls, iid_outcomes, make_eval, make_video
from evalkit import interrupt_when_marked, read_json, run_cli

from glasskit_eval.reports.early_stop import decided_lines, early_stop_json
from glasskit_eval.reports.loading import load_report_file, run_from_reports
from glasskit_eval.summary import RunSummary

pytestmark = pytest.mark.e2e

PLANNED = 2400


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_video(tmp_path_factory.mktemp("video") / "long.mp4", PLANNED // 10)


def early_run(root: Path, eval_dir: Path, *extra: str) -> tuple[int, str, str, dict]:
    report = root / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop", "--early-stop-block", "0.5",
                             "--output-json", report, "--junit-xml", root / "junit.xml", *extra)
    return code, out, err, read_json(report) if report.exists() else {}


@pytest.mark.parametrize(("rate", "verdict", "code"), [(0.97, "pass", 0), (0.80, "fail", 1)])
def test_decides_early_and_every_report_agrees(tmp_path: Path, video: Path, rate: float, verdict: str,
                                               code: int) -> None:
    eval_dir = make_eval(tmp_path, video, iid_outcomes(random.Random(7), PLANNED, rate), cost=0.01)
    exit_code, out, err, report = early_run(tmp_path, eval_dir, "--html", tmp_path / "report.html")
    assert exit_code == code, err
    made = calls(tmp_path)
    assert len(made) == len(set(made)) <= 0.25 * PLANNED

    block = report["early_stop"]
    assert (block["samples_evaluated"], block["samples_planned"], block["seed"], block["block_s"]) == (
        len(made), PLANNED, 0, 0.5)
    assert block["calls_saved"] == PLANNED - len(made)
    assert block["cost_saved"] == pytest.approx(0.01 * (PLANNED - len(made)))
    (gate,) = block["gates"]
    assert (gate["name"], gate["verdict"], gate["early"]) == ("eval_min_pass_rate", verdict, True)
    assert (gate["low"] >= 0.9) if verdict == "pass" else (gate["high"] < 0.9)

    # Not-evaluated samples are never failures: the counts are those of the calls made.
    results = report["trials"][0]["results"]
    statuses = {r["sample_index"]: r["status"] for r in results}
    assert {i for i, s in statuses.items() if s != "not_evaluated"} == set(made)
    summary = report["trials"][0]["summary"]
    assert summary["evaluated"] == len(made) and summary["not_evaluated"] == PLANNED - len(made)
    assert summary["failed"] == sum(1 for s in statuses.values() if s == "failed")
    (trial_gate,) = [g for g in report["trials"][0]["gates"] if g["name"] == "eval_min_pass_rate"]
    assert trial_gate["passed"] is (verdict == "pass")

    line = re.search(r"Decided early: (PASS|FAIL) eval_min_pass_rate >= 90% after ([\d,]+) of 2,400 samples "
                     r"\(95% anytime-valid bound (\d+\.\d)%\)", out)
    assert line is not None and line.group(1) == verdict.upper()
    assert int(line.group(2).replace(",", "")) == gate["after"] == len(made)
    bound = gate["low"] if verdict == "pass" else gate["high"]
    assert float(line.group(3)) == pytest.approx(bound * 100, abs=0.05)
    assert out.strip().splitlines()[-1].startswith("PASSED" if verdict == "pass" else "FAILED")
    assert line.group(0) in out.strip().splitlines()[-1]
    assert f"{PLANNED - len(made):,} of 2,400 adapter calls saved" in out

    page = (tmp_path / "report.html").read_text()
    assert f"Not evaluated (decided early)</dt><dd>{PLANNED - len(made)}<" in page
    assert line.group(0).replace(">", "&gt;") in page and 'value="4" checked> not_evaluated' in page

    # `report` renders the record again from the JSON alone: the decision lines beside the gates' messages.
    code, _out, err = run_cli("report", tmp_path / "report.json", "--html", tmp_path / "again.html")
    assert code == 0, err
    again = (tmp_path / "again.html").read_text()
    decided = line.group(0).replace(">", "&gt;")
    assert again.count(decided) == page.count(decided) >= 2
    assert f"Not evaluated (decided early)</dt><dd>{PLANNED - len(made)}<" in again

    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert int(junit.get("skipped", "")) == PLANNED - len(made)
    assert int(junit.get("failures", "")) == summary["failed"] + (verdict == "fail")
    gates = next(s for s in junit if s.get("name") == "gates")
    case = next(c for c in gates if c.get("name") == "eval_min_pass_rate")
    assert (case.find("failure") is None) is (verdict == "pass")
    assert line.group(0) in [p.get("value") for p in gates.iter("property")]


def test_same_seed_same_order_another_seed_another(tmp_path: Path, video: Path) -> None:
    outcomes = iid_outcomes(random.Random(3), PLANNED, 0.97)
    logs = []
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        root = tmp_path / name
        eval_dir = make_eval(root, video, outcomes)
        code, _out, err, _report = early_run(root, eval_dir, "--seed", seed)
        assert code == 0, err
        logs.append(calls(root))
    assert logs[0] == logs[1]
    assert logs[0] != logs[2] and logs[0][:5] != logs[2][:5]
    # Each block's frames in time order: 0.5 s blocks are runs of 5 consecutive sample times.
    assert all(b - a == 1 for a, b in zip(logs[0][:5], logs[0][1:5], strict=False))


def test_failures_in_runs_decide_as_the_whole_set(tmp_path: Path, video: Path) -> None:
    """Failures in runs of ~20 samples at 0.85 and 0.95: the early verdict is the full population's."""
    for name, rate, expected in (("low", 0.85, 1), ("high", 0.95, 0)):
        root = tmp_path / name
        eval_dir = make_eval(root, video, burst_outcomes(random.Random(11), PLANNED, rate))
        code, _out, err, report = early_run(root, eval_dir)
        assert code == expected, err
        assert report["early_stop"]["samples_evaluated"] < PLANNED


def test_refused_before_any_call(tmp_path: Path, video: Path) -> None:
    eval_dir = make_eval(tmp_path, video, [1] * PLANNED, min_pass_rate=None)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop")
    assert code == 2 and "--min-pass-rate" in err and "has none" in err
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop", "--min-pass-rate", "0.9",
                              "--shard", "1/2", "--output-json", tmp_path / "r.json")
    assert code == 2 and "--shard" in err
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop-block", "2", "--min-pass-rate", "0.9")
    assert code == 2 and "needs --early-stop" in err
    assert calls(tmp_path) == []
    # A gate on the command line is enough.
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop", "--min-pass-rate", "0.5")
    assert code == 0, err
    assert 0 < len(calls(tmp_path)) < PLANNED


def test_a_plain_run_has_no_early_stop_keys(tmp_path: Path, video: Path) -> None:
    outcomes = [1] * 300
    eval_dir = make_eval(tmp_path, video, outcomes)
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--output-json", tmp_path / "r.json")
    report = read_json(tmp_path / "r.json")
    assert code == 0 and "early_stop" not in report and "not_evaluated" not in report["summary"]
    assert "Decided early" not in out and "not evaluated" not in out
    assert calls(tmp_path) == list(range(300))


def with_arm(root: Path, eval_dir: Path, outcomes: list[int]) -> None:
    """config.yaml declares arm `worse`: the same adapter replaying ``outcomes`` into its own log."""
    (root / "worse.json").write_text(json.dumps(outcomes))
    arm = {"adapter_config": {"outcomes": str(root / "worse.json"), "log": str(root / "worse.log")}}
    config = eval_dir / "config.yaml"
    config.write_text(config.read_text() + f"arms:\n  worse: {json.dumps(arm)}\n")


def arm_calls(root: Path) -> list[int]:
    log = root / "worse.log"
    return [int(x) for x in log.read_text().split()] if log.exists() else []


@pytest.mark.parametrize("arms", [False, True])
def test_sigkill_and_resume_reach_the_same_decision(tmp_path: Path, video: Path, arms: bool) -> None:
    outcomes = iid_outcomes(random.Random(5), PLANNED, 0.96)
    worse = iid_outcomes(random.Random(6), PLANNED, 0.85)
    extra = ["--arm", "worse"] if arms else []
    whole = tmp_path / "whole"
    eval_dir = make_eval(whole, video, outcomes)
    if arms:
        with_arm(whole, eval_dir, worse)
    code, _out, err, expected = early_run(whole, eval_dir, *extra)
    assert code == (1 if arms else 0), err
    killed = tmp_path / "killed"
    eval_dir = make_eval(killed, video, outcomes, mark_after=40)
    if arms:
        with_arm(killed, eval_dir, worse)
    code, err = interrupt_when_marked(["run", "--eval-dir", str(eval_dir), "--early-stop", "--early-stop-block", "0.5",
                                       "--output-json", str(killed / "report.json"), *extra], killed / "mark",
                                      signal.SIGKILL)
    assert code == -signal.SIGKILL, err
    before = calls(killed)
    assert 40 <= len(before) < expected["early_stop"]["gates"][0]["after"]
    (checkpoint,) = (eval_dir / "runs" / "checkpoints").iterdir()
    code, _out, err = run_cli("run", "--resume", checkpoint)
    assert code == (1 if arms else 0), err
    resumed = read_json(killed / "report.json")
    assert resumed["early_stop"]["gates"] == expected["early_stop"]["gates"]
    assert resumed["early_stop"]["samples_evaluated"] == expected["early_stop"]["samples_evaluated"]
    for arm in ([None, "worse"] if arms else [None]):
        done = {r["sample_index"] for r in resumed["trials"][0]["results"]
                if r["status"] != "not_evaluated" and r.get("arm") in (arm, "control" if arm is None else arm)}
        made = calls if arm is None else arm_calls
        assert done == set(made(whole)) == set(made(killed))


STREAMING = """
def create_evaluator(config):
    return Both()

class Both:
    def evaluate(self, sample, target):
        return {"ok": True}

    def on_frame(self, sample, target):
        return None
"""


def test_a_stream_target_runs_whole_beside_early_stopped_samples(tmp_path: Path) -> None:
    from evalkit import make_eval as make_fixture_eval

    text = ("video: cfr_h264.mp4\ntargets:\n  ok:\n    samples:\n    - range: [0, 2]\n      every_s: 0.05\n"
            "      field: ok\n      expect: true\n  pan:\n    events: [{at: 1, expect: x}]\n")
    eval_dir = make_fixture_eval(tmp_path, {"c": text}, adapter=STREAMING)
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop", "--early-stop-block", "0.1",
                              "--min-pass-rate", "0.5", "--output-json", report)
    data = read_json(report)
    assert code == 0, err
    assert data["early_stop"]["samples_evaluated"] < data["early_stop"]["samples_planned"] == 40
    (stream,) = data["streams"]
    assert stream["frames_delivered"] == 20  # every frame of the 2 s, 10 fps clip


def test_blocks_side_by_side_with_concurrency_decide_alike(tmp_path: Path, video: Path) -> None:
    """--concurrency 10 runs two 5-sample blocks at once: the same samples on every rerun."""
    outcomes = iid_outcomes(random.Random(9), PLANNED, 0.97)
    made = []
    for name in ("a", "b"):
        root = tmp_path / name
        code, _out, err, report = early_run(root, make_eval(root, video, outcomes), "--concurrency", "10")
        assert code == 0, err
        made.append(sorted(calls(root)))
        assert len(made[-1]) == report["early_stop"]["samples_evaluated"]
        assert len(made[-1]) % 10 == 0  # whole batches of two blocks
    assert made[0] == made[1]


def test_each_arm_stops_when_its_own_gates_are_decided(tmp_path: Path, video: Path) -> None:
    eval_dir = make_eval(tmp_path, video, iid_outcomes(random.Random(0), PLANNED, 0.97))
    with_arm(tmp_path, eval_dir, iid_outcomes(random.Random(1), PLANNED, 0.80))
    code, out, err, report = early_run(tmp_path, eval_dir, "--arm", "worse")
    assert code == 1, err
    control, other = calls(tmp_path), arm_calls(tmp_path)
    gates = {g["name"]: g for g in report["early_stop"]["gates"]}
    assert (gates["control/eval_min_pass_rate"]["verdict"], gates["worse/eval_min_pass_rate"]["verdict"]) == (
        "pass", "fail")
    assert gates["control/eval_min_pass_rate"]["after"] == len(control)
    assert gates["worse/eval_min_pass_rate"]["after"] == len(other) < len(control)
    # One seeded order for every arm: the arm that stopped first evaluated a prefix of the other's.
    assert other == control[:len(other)]
    assert report["early_stop"]["samples_evaluated"] == len(control) + len(other)
    assert "Decided early: FAIL worse/eval_min_pass_rate >= 90%" in out
    # The paired comparison pairs the samples both arms evaluated.
    (overall,) = [c for c in report["arm_comparisons"] if c["target"] is None]
    flips = {(f["control_status"], f["arm_status"]) for f in overall["flips"]}
    assert "not_evaluated" not in {s for pair in flips for s in pair}


def test_with_repeat_each_trial_decides_on_its_own_order(tmp_path: Path, video: Path) -> None:
    eval_dir = make_eval(tmp_path, video, iid_outcomes(random.Random(4), PLANNED, 0.97))
    code, out, err, report = early_run(tmp_path, eval_dir, "--repeat", "2")
    assert code == 0, err
    made = calls(tmp_path)
    block = report["early_stop"]
    first, second = (g for g in block["gates"])
    assert (first["trial"], second["trial"]) == (1, 2) and first["verdict"] == second["verdict"] == "pass"
    assert block["samples_evaluated"] == len(made) == first["after"] + second["after"]
    assert made[:first["after"]] != made[first["after"]:][:first["after"]]  # another order
    assert block["samples_planned"] == 2 * PLANNED
    assert "[1/2] Decided early: PASS" in out and "[2/2] Decided early: PASS" in out
    for trial, gate in zip(report["trials"], (first, second), strict=True):
        assert trial["summary"]["evaluated"] == gate["after"]
    # Read back through the strict loader, each trial gets its own record: the same block renders again.
    path = tmp_path / "report.json"
    summary = RunSummary.of(run_from_reports([(path, load_report_file(path))]))
    assert early_stop_json(summary) == block
    assert decided_lines(summary) == [line for line in out.splitlines() if line.startswith(("[1/2] Decided", "[2/2] Decided"))]
    damaged = read_json(path)
    damaged["early_stop"]["gates"][1]["verdict"] = "maybe"
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    code, _out, err = run_cli("report", tmp_path / "damaged.json", "--html", tmp_path / "damaged.html")
    assert code == 2 and "damaged.json" in err and "early_stop.gates[1].verdict" in err, err


def test_a_baseline_pairs_only_the_samples_both_runs_evaluated(tmp_path: Path, video: Path) -> None:
    """Two seeds evaluate different samples: the ones either run left ``not_evaluated`` are samples that
    run does not have, never status changes or regressions."""
    eval_dir = make_eval(tmp_path, video, iid_outcomes(random.Random(12), PLANNED, 0.97))
    code, _out, err, first = early_run(tmp_path, eval_dir, "--seed", "0")
    assert code == 0, err
    (tmp_path / "report.json").rename(tmp_path / "base.json")
    code, out, err, second = early_run(tmp_path, eval_dir, "--seed", "1", "--baseline", tmp_path / "base.json",
                                       "--fail-on-regression")
    assert code == 0, err

    def evaluated(report: dict) -> set[int]:
        return {r["sample_index"] for r in report["trials"][0]["results"] if r["status"] != "not_evaluated"}

    both = evaluated(first) & evaluated(second)
    found = second["baseline"]
    assert found["matched_samples"] == len(both)
    assert found["counts"]["status_changed"] == 0 and found["regressions"] == 0
    assert found["counts"]["removed"] == len(evaluated(first) - both)
    assert found["counts"]["added"] == len(evaluated(second) - both)
    assert "not_evaluated" not in {c[k] for c in found["changes"] for k in ("status", "baseline_status")}
    assert "status changed" not in out
