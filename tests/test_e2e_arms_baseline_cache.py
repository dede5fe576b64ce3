"""Arms with --baseline (matched per arm) and --cache (keyed per arm), on the three-arm eval of test_e2e_arms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evalkit import read_json, run_cli
from test_e2e_arms import THREE, by_arm, eval_dir  # noqa: F401  (eval_dir is a fixture)

pytestmark = pytest.mark.e2e


def gates(report: dict[str, Any]) -> dict[str, bool]:
    return {g["name"]: g["passed"] for g in report["gates"]}


def test_the_control_arm_matches_a_plain_baseline(eval_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", "plain.json")[0] == 0  # fails frames 3 and 7
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "arms.json", "--baseline", "plain.json",
                             "--fail-on-regression", *THREE)
    assert code == 1, err
    report = read_json(tmp_path / "arms.json")
    small = report["arms"]["small"]["baseline"]
    # small fails 3, 7, 10-13: four samples that passed in the plain run fail now.
    assert small["matched_samples"] == 20 and small["counts"]["pass_to_fail"] == 4
    assert [c["timestamp_s"] for c in small["changes"] if c["kind"] == "pass_to_fail"] == [1.0, 1.1, 1.2, 1.3]
    assert report["baseline"] == small  # the single-baseline outputs show the control's diff
    assert report["arms"]["large"]["baseline"] is None and report["arms"]["cmd"]["baseline"] is None
    assert gates(report) == {"small/baseline_regressions": False}
    assert "Arm small against its plain run:" in out
    assert "No baseline for arms large, cmd: the baseline report has no results of that arm" in out


def test_each_arm_matches_its_own_arm_of_an_arms_baseline(eval_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", "before.json", *THREE)[0] == 0
    (tmp_path / "large.yaml").write_text("fail: [7, 8]\n")  # large now also fails frame 8
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "after.json", "--baseline",
                             "before.json", "--fail-on-regression", *THREE)
    assert code == 1, err
    report = read_json(tmp_path / "after.json")
    diffs = {arm: report["arms"][arm]["baseline"] for arm in ("small", "large", "cmd")}
    # Matched arm to arm: had large been matched with small (or all arms pooled), 0.8 s would not stand out.
    assert {arm: d["counts"]["pass_to_fail"] for arm, d in diffs.items()} == {"small": 0, "large": 1, "cmd": 0}
    assert [(c["kind"], c["timestamp_s"]) for c in diffs["large"]["changes"]] == [("pass_to_fail", 0.8)]
    assert all(d["matched_samples"] == 20 for d in diffs.values())
    assert gates(report) == {"small/baseline_regressions": True, "large/baseline_regressions": False,
                             "cmd/baseline_regressions": True}
    assert "Arm large against its arm large:" in out
    # --gate-arm: only that arm's baseline gate decides.
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "gated.json", "--baseline",
                              "before.json", "--fail-on-regression", "--gate-arm", "cmd", *THREE)
    assert code == 0, err
    assert gates(read_json(tmp_path / "gated.json")) == {"cmd/baseline_regressions": True}


def test_a_rerun_with_the_cache_hits_per_arm(eval_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    args = ("run", "--eval-dir", eval_dir, "--cache", "cache", "--arm", "small", "--arm",
            "large=large.yaml", "--perturb", "brightness:0.5", "--perturb", "noise:20", "--control", "small")
    code, out, err = run_cli(*args, "--output-json", "cold.json")
    assert code == 0, err
    cold = read_json(tmp_path / "cold.json")
    # Four arms, 20 samples each: no arm was answered from another's entries (same frames, other
    # config or other pixels), so 80 calls and 80 entries.
    assert cold["observation_cache"]["misses"] == 80 and cold["observation_cache"]["writes"] == 80
    assert not any(r.get("cached") for r in cold["trials"][0]["results"])
    code, out, err = run_cli(*args, "--output-json", "warm.json")
    assert code == 0, err
    warm = read_json(tmp_path / "warm.json")
    assert warm["observation_cache"]["hits"] == 80 and warm["observation_cache"]["misses"] == 0
    for arm, results in by_arm(warm).items():
        assert all(r.get("cached") for r in results), arm
        # Each arm got its own observations back (the noise arm's differ from the control's).
        assert [r["observed"] for r in results] == [r["observed"] for r in by_arm(cold)[arm]]
    noisy = [r["observed"]["mean"] for r in by_arm(warm)["noise:20"]]
    plain = [r["observed"]["mean"] for r in by_arm(warm)["small"]]
    assert noisy != plain
    # Another seed: other noise, so the noise arm misses and calls again; the other arms still hit.
    code, _out, err = run_cli(*args, "--seed", "9", "--output-json", "seeded.json")
    assert code == 0, err
    seeded = read_json(tmp_path / "seeded.json")
    assert {arm: all(r.get("cached", False) for r in rs) for arm, rs in by_arm(seeded).items()} == {
        "small": True, "large": True, "brightness:0.5": True, "noise:20": False}
    assert seeded["observation_cache"]["misses"] == 20
