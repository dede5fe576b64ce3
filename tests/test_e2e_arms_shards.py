"""Arms with --repeat, and arms split by --shard then merged: the unsharded run's report, recomputed.

Uses the three-arm eval of ``test_e2e_arms`` (frames that carry their index in their pixels, an
adapter that fails the frames its config lists), so every figure is known in advance.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from evalkit import read_json, run_cli
from test_e2e_arms import FAILING, THREE, by_arm, eval_dir  # noqa: F401  (eval_dir is a fixture)

pytestmark = pytest.mark.e2e

ARMS = (*THREE, "--perturb", "brightness:0.5", "--max-robustness-drop", "0.2")


def timeless(value: Any) -> Any:
    """A report without what differs between equal runs: durations, latencies, the Pareto set they decide."""
    if isinstance(value, dict):
        if "p50_s" in value:
            return {"count": value.get("count")}
        return {k: timeless(v) for k, v in value.items()
                if not re.search("duration|throughput|average_evaluation|checkpoint|pareto", k)}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def test_repeat_with_arms_gives_every_arm_every_trial_and_its_own_stability(eval_dir: Path,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "r.json", "--repeat", "2",
                             "--max-flaky-samples", "0", *THREE)
    assert code == 0, err
    report = read_json(tmp_path / "r.json")
    assert len(report["trials"]) == 2
    for trial in report["trials"]:
        results = by_arm({"trials": [trial]})
        assert list(results) == ["small", "large", "cmd"]
        for arm, mine in results.items():
            assert [r["frame_index"] for r in mine] == list(range(20))
            assert [r["status"] == "failed" for r in mine] == [i in FAILING[arm] for i in range(20)]
        gates = [g["name"] for g in trial["gates"]]
        assert gates == [f"{a}/{g}" for a in ("small", "large", "cmd") for g in ("adapter_errors",)]
    # A deterministic adapter: nothing flaky in any arm, each arm's flaky gate its own.
    assert [(g["name"], g["passed"]) for g in report["gates"]] == [
        ("small/max_flaky_samples", True), ("large/max_flaky_samples", True), ("cmd/max_flaky_samples", True)]
    for arm in ("small", "large", "cmd"):
        summary = report["arms"][arm]["summary"]
        # Both trials count: 40 attempts, the same pass rate as one trial.
        assert summary["evaluated"] == 40 and summary["passed"] == 2 * (20 - len(FAILING[arm]))
    overall = {c["arm"]: c for c in report["arm_comparisons"] if c["target"] is None}
    assert overall["large"]["delta_pass_rate"] == pytest.approx(5 / 20)
    # A flip is listed per trial in which it happened, with its trial.
    assert sorted(f["trial"] for f in overall["large"]["flips"]) == [1] * 5 + [2] * 5
    assert "Arms (same frames" in out


@pytest.mark.parametrize("total", [2, 3])
def test_arm_shards_merge_to_the_unsharded_run(eval_dir: Path, tmp_path: Path, total: int) -> None:  # noqa: F811
    options = ("--repeat", "2", "--min-pass-rate", "0.75", *ARMS)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "whole.json", "--junit-xml",
                              "whole.xml", *options)
    assert code == 1, err  # small and the dimmed arm miss 0.75; the dimmed arm drops significantly
    shards = []
    for index in range(1, total + 1):
        path = tmp_path / f"shard-{index}.json"
        code, out, err = run_cli("run", "--eval-dir", eval_dir, "--shard", f"{index}/{total}", "--output-json",
                                 path, *options)
        assert code == 0, err
        shard = read_json(path)
        assert shard["gates"] == [] and shard["shard"]["arms"]["names"] == ["small", "large", "cmd",
                                                                            "brightness:0.5"]
        shards.append(path)
    counts = [len(read_json(p)["trials"][0]["results"]) for p in shards]
    assert sum(counts) == 4 * 20 and all(c % 4 == 0 for c in counts)  # every arm of each shard's samples
    code, out, err = run_cli("merge-reports", *shards, "--output-json", "merged.json", "--junit-xml", "merged.xml")
    assert code == 1, err
    whole, merged = read_json(tmp_path / "whole.json"), read_json(tmp_path / "merged.json")
    assert timeless(merged) == timeless(whole)
    assert set(merged["pareto"]) <= {"small", "large", "cmd", "brightness:0.5"} and merged["pareto"]
    gates = {g["name"]: g["passed"] for g in merged["gates"]}
    assert gates == {"brightness:0.5/max_robustness_drop": False}
    trial_gates = {g["name"]: g["passed"] for g in merged["trials"][0]["gates"]}
    assert trial_gates["small/eval_min_pass_rate"] is False and trial_gates["large/eval_min_pass_rate"] is True
    assert "Arms (same frames" in out

    def untimed(path: Path) -> str:
        text = re.sub(r' time="[0-9.]+"', "", path.read_text())
        return re.sub(r'(name="latency\.\w+" value=)"[0-9.]+"', r"\1", text)

    assert untimed(tmp_path / "merged.xml") == untimed(tmp_path / "whole.xml")


def test_merge_refuses_shards_of_different_arms(eval_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    first, second = tmp_path / "s1.json", tmp_path / "s2.json"
    assert run_cli("run", "--eval-dir", eval_dir, "--shard", "1/2", "--output-json", first, *THREE)[0] == 0
    assert run_cli("run", "--eval-dir", eval_dir, "--shard", "2/2", "--output-json", second, "--arm", "small",
                   "--arm", "cmd")[0] == 0
    code, _out, err = run_cli("merge-reports", first, second)
    assert code == 2
    assert "come from different runs: their arms differ" in err
    damaged = read_json(first)
    damaged["shard"]["arms"]["control"] = "nobody"
    first.write_text(json.dumps(damaged))
    code, _out, err = run_cli("merge-reports", first)
    assert (code, err) == (2, f"error: {first}: its `shard` object is damaged; rerun that shard\n")


def test_arm_shards_with_a_stream_target_merge_to_the_unsharded_run(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo: a stream target (lights_alert) and two perturbation arms in config.yaml.
    demo = tmp_path / "eval"
    shutil.copytree(Path(__file__).parent.parent / "fixtures" / "demo" / "eval", demo)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    options = ("--arm", "all", "--min-recall", "0.9")
    code, _out, err = run_cli("run", "--eval-dir", demo, "--output-json", "whole.json", *options)
    assert code == 1, err  # the dimmed arm misses the alert
    shards = [tmp_path / f"shard-{i}.json" for i in (1, 2)]
    for index, path in enumerate(shards, 1):
        code, _out, err = run_cli("run", "--eval-dir", demo, "--shard", f"{index}/2", "--output-json", path, *options)
        assert code == 0, err
    code, _out, err = run_cli("merge-reports", *shards, "--output-json", "merged.json")
    assert code == 1, err
    whole, merged = read_json(tmp_path / "whole.json"), read_json(tmp_path / "merged.json")
    # Each arm's stream once, in the unsharded run's order; stream gates per arm, as that run's.
    assert [(s["case"], s["target"], s["arm"]) for s in merged["streams"]] == [
        ("kitchen", "lights_alert", arm) for arm in ("control", "jpeg", "low_light")]
    assert timeless(merged["streams"]) == timeless(whole["streams"])
    assert merged["trials"][0]["gates"] == whole["trials"][0]["gates"]
    assert merged["gates"] == whole["gates"]
    recall = {g["name"]: g["passed"] for g in merged["trials"][0]["gates"] if g["name"].endswith("min_recall")}
    assert recall == {"control/lights_alert_min_recall": True, "jpeg/lights_alert_min_recall": True,
                      "low_light/lights_alert_min_recall": False}
