"""Shards + merge-reports give the unsharded run's report; refusals name what does not fit."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cikit import ci_eval
from evalkit import read_json, run_cli

CONFIG = """\
thresholds:
  min_pass_rate: 0.5
  per_target:
    idx:
      min_pass_rate: 0.9
"""


def timeless(value: Any) -> Any:
    """A report without what differs between equal runs: durations, latencies, rates per second, checkpoint."""
    if isinstance(value, dict):
        if "p50_s" in value:  # a latency object: counted samples match, times never do
            return {"count": value.get("count")}
        return {k: timeless(v) for k, v in value.items()
                if not re.search("duration|throughput|average_evaluation|checkpoint", k)}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    path = ci_eval(tmp_path, {"door/size/0": "raise"})
    (path / "config.yaml").write_text(CONFIG)
    lamp = path / "cases" / "lamp.yaml"
    lamp.write_text(lamp.read_text() + "thresholds:\n  max_failures: 0\n")
    return path


def run_shards(eval_dir: Path, total: int, *options: str) -> list[Path]:
    paths = []
    for index in range(1, total + 1):
        path = eval_dir.parent / f"shard-{index}.json"
        code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--shard", f"{index}/{total}",
                                 "--output-json", path, *options)
        assert code == 0, err  # a shard has no gates: merge-reports applies them
        assert f"Shard {index}/{total}: gates are applied when `merge-reports`" in out
        paths.append(path)
    return paths


@pytest.mark.parametrize(("total", "options"), [
    (3, ()),  # fewer cases than shards: time slices
    (2, ()),  # whole cases
    (3, ("--repeat", "2", "--max-flaky-samples", "0")),
    (2, ("--repeat", "2", "--min-target-pass-rate", "0.6")),
    (2, ("--max-cost", "0")),  # every gate option travels in the shard block, run-level ones too
])
def test_shards_merged_equal_the_unsharded_run(eval_dir: Path, total: int, options: tuple[str, ...]) -> None:
    tmp = eval_dir.parent
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", tmp / "whole.json",
                              "--junit-xml", tmp / "whole.xml", *options)
    assert code == 1, err  # the adapter error and the idx pass-rate gate fail
    shards = run_shards(eval_dir, total, *options)
    for path in shards:
        report = read_json(path)
        assert report["gates"] == [] and all(t["gates"] == [] for t in report["trials"])
        assert report["shard"]["eval_fingerprint"].startswith("sha256:")
    code, out, err = run_cli("merge-reports", *shards, "--output-json", tmp / "merged.json",
                             "--junit-xml", tmp / "merged.xml")
    assert code == 1, err
    assert out.startswith(f"Merged {total} shard reports\n")
    whole, merged = read_json(tmp / "whole.json"), read_json(tmp / "merged.json")
    assert timeless(merged) == timeless(whole)
    assert merged["gates"] == whole["gates"] and merged["trials"][0]["gates"] == whole["trials"][0]["gates"]
    assert any(not g["passed"] for g in merged["trials"][0]["gates"])
    def untimed(path: Path) -> str:
        text = re.sub(r' time="[0-9.]+"', "", path.read_text())
        return re.sub(r'(name="latency\.\w+" value=)"[0-9.]+"', r"\1", text)
    assert untimed(tmp / "merged.xml") == untimed(tmp / "whole.xml")
    etree = pytest.importorskip("lxml.etree")
    schema = etree.XMLSchema(etree.parse(str(Path(__file__).parent / "data" / "junit" / "junit-ci.xsd")))
    assert schema.validate(etree.parse(str(tmp / "merged.xml"))), schema.error_log


def test_every_shard_runs_only_its_samples(eval_dir: Path) -> None:
    shards = run_shards(eval_dir, 3)
    counts = [len(read_json(p)["trials"][0]["results"]) for p in shards]
    assert sum(counts) == 10 and all(counts)
    selection = read_json(shards[0])["shard"]["selection"]
    assert selection[0] == ["door", "idx", 0, 7] and len(selection) == 10


def test_merge_refuses_shards_that_do_not_fit(eval_dir: Path) -> None:
    shards = run_shards(eval_dir, 3)
    code, _out, err = run_cli("merge-reports", shards[0], shards[2])
    assert (code, err) == (2, "error: missing shards: 2/3; pass all 3 shard reports\n")
    code, _out, err = run_cli("merge-reports", *shards, shards[1])
    assert (code, err) == (2, f"error: shard 2/3 is given more than once ({shards[1]}, {shards[1]})\n")
    other = eval_dir.parent / "other.json"
    run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--shard", "2/3", "--min-pass-rate", "0.1",
            "--output-json", other)
    code, _out, err = run_cli("merge-reports", shards[0], other, shards[2])
    assert (code, err) == (2, f"error: {other} and {shards[0]} come from different runs: their options "
                              "differ; merge the shards of one matrix run\n")
    plain = eval_dir.parent / "plain.json"
    run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", plain)
    code, _out, err = run_cli("merge-reports", plain)
    assert (code, err) == (2, f"error: {plain} is not a shard report; merge the --output-json reports of "
                              "`run --shard I/N`\n")
    # A result lost from a shard's report (or the case files changed between jobs).
    damaged = json.loads(shards[1].read_text())
    lost = damaged["trials"][0]["results"].pop()
    shards[1].write_text(json.dumps(damaged))
    code, _out, err = run_cli("merge-reports", *shards)
    assert code == 2
    assert err == (f"error: trial 1: no shard reports {lost['case']} / {lost['target']} sample "
                   f"{lost['sample_index']}; rerun the shard that should have run them\n")
    damaged["trials"][0]["results"].append(lost)
    damaged["shard"]["eval_fingerprint"] = "sha256:0"
    shards[1].write_text(json.dumps(damaged))
    code, _out, err = run_cli("merge-reports", *shards)
    assert (code, err) == (2, f"error: {shards[1]} and {shards[0]} come from different runs: their eval (case "
                              "files, config or videos) differ; merge the shards of one matrix run\n")


def test_shard_auto_is_resolved_before_the_checkpoint(eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GitLab counts from 1; shard 1/2 has door's adapter error, so its checkpoint is kept.
    monkeypatch.setenv("CI_NODE_INDEX", "1")
    monkeypatch.setenv("CI_NODE_TOTAL", "2")
    path = eval_dir.parent / "auto.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--shard", "auto", "--output-json", path)
    assert code == 0, err
    assert read_json(path)["shard"]["index"] == 1 and read_json(path)["shard"]["total"] == 2
    # Named once, when it is made (stderr); the resume hint's command names it again.
    checkpoint = Path(re.search(r"^Checkpoint: (\S+)$", err, re.M).group(1))  # type: ignore[union-attr]
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    assert manifest["invocation"]["shard"] == "1/2"
    # The resume runs the recorded part, whatever the environment says now.
    monkeypatch.setenv("CI_NODE_INDEX", "2")
    code, _out, err = run_cli("run", "--resume", checkpoint)
    assert code == 0, err
    assert read_json(path)["shard"]["index"] == 1
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--shard", "1/2", "--baseline", path)
    assert (code, err) == (2, "error: --baseline compares whole runs; pass it to merge-reports instead of to "
                              "each shard\n")


def test_an_indexed_job_and_a_slurm_array_shard_with_auto(eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GLASSKIT_SHARD", "CI_NODE_INDEX", "BUILDKITE_PARALLEL_JOB", "CIRCLE_NODE_INDEX"):
        monkeypatch.delenv(name, raising=False)
    paths = []
    # Kubernetes Indexed Job pod 0 of 2 (0-based, count given), then Slurm task 2 of --array=1-2.
    for env in ({"JOB_COMPLETION_INDEX": "0", "GLASSKIT_SHARD_TOTAL": "2"},
                {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "2"}):
        with monkeypatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            path = eval_dir.parent / f"pod-{len(paths)}.json"
            code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--shard", "auto",
                                      "--output-json", path)
            assert code == 0, err
            assert read_json(path)["shard"]["index"] == len(paths) + 1
            paths.append(path)
    code, out, err = run_cli("merge-reports", *paths)
    assert code == 1 and out.startswith("Merged 2 shard reports\n"), err


def test_a_damaged_shard_object_is_refused(eval_dir: Path) -> None:
    shards = run_shards(eval_dir, 2)
    damaged = json.loads(shards[0].read_text())
    damaged["shard"]["selection"][0] = ["door", "idx"]
    shards[0].write_text(json.dumps(damaged))
    code, _out, err = run_cli("merge-reports", *shards)
    assert (code, err) == (2, f"error: {shards[0]}: its `shard` object is damaged; rerun that shard\n")
    # A shard count beyond the limit is damage too, not a list of 9,999 missing shards to build.
    for path in shards:
        edited = json.loads(path.read_text())
        edited["shard"]["total"] = 10_001
        path.write_text(json.dumps(edited))
    code, _out, err = run_cli("merge-reports", shards[1], shards[1])
    assert (code, err) == (2, f"error: {shards[1]}: its `shard` object is damaged; rerun that shard\n")


def test_a_per_target_order_that_is_not_names_is_damage(eval_dir: Path) -> None:
    shards = run_shards(eval_dir, 2)
    for path in shards:
        edited = json.loads(path.read_text())
        order = edited["shard"]["thresholds"]["eval"]["per_target_order"]
        edited["shard"]["thresholds"]["eval"]["per_target_order"] = [1, *order]  # mixed with a name: sorting them fails
        path.write_text(json.dumps(edited))
    code, _out, err = run_cli("merge-reports", *shards)
    assert (code, err) == (2, f"error: {shards[0]}: its `shard` object is damaged; rerun that shard\n")


def test_a_hand_edited_gate_option_is_damage(eval_dir: Path) -> None:
    shards = run_shards(eval_dir, 2, "--min-pass-rate", "0.5")
    for path in shards:
        edited = json.loads(path.read_text())
        edited["shard"]["options"]["min_pass_rate"] = "half"
        path.write_text(json.dumps(edited))
    code, _out, err = run_cli("merge-reports", *shards)
    assert (code, err) == (2, f"error: {shards[0]}: its `shard` object is damaged; rerun that shard\n")


def test_merge_compares_with_a_baseline_and_annotates(eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = eval_dir.parent
    run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", tmp / "whole.json")
    shards = run_shards(eval_dir, 2)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp / "summary.md"))
    code, out, err = run_cli("merge-reports", *shards, "--baseline", "whole.json", "--fail-on-regression",
                             "--output-json", tmp / "merged.json")
    assert code == 1, err  # the adapter error and the idx gate; the baseline gate passes
    merged = read_json(tmp / "merged.json")
    assert merged["gates"] == [{"name": "baseline_regressions", "passed": True,
                                "message": "no regressions against the baseline"}]
    assert merged["baseline"]["counts"]["pass_to_fail"] == 0 and merged["baseline"]["matched_samples"] == 10
    errors = [line for line in out.splitlines() if line.startswith("::error ")]
    assert [e.split("::")[1] for e in errors] == [
        "error title=gate adapter_errors failed",
        "error title=gate eval_idx_min_pass_rate failed",
        "error file=eval/cases/door.yaml,line=7,title=door / idx @ 1s failed",
        "error file=eval/cases/door.yaml,line=10,title=door / idx @ 1.7s failed",
        "error file=eval/cases/door.yaml,line=16,title=door / size @ 0s error"]
    assert "### Baseline\n\nAgainst `whole.json`: 10 samples matched; no changes." in (tmp / "summary.md").read_text()


def test_shards_need_a_json_report_and_leave_annotations_to_the_merge(eval_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--shard", "1/2")
    assert (code, err) == (2, "error: --shard needs --output-json PATH: merge-reports merges the shards' "
                              "JSON reports\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    args = ("run", "--eval-dir", eval_dir, "--keep-going", "--shard", "1/2", "--output-json", "s.json")
    code, out, _err = run_cli(*args)
    assert code == 0 and "::error" not in out
    code, out, _err = run_cli(*args, "--annotations", "github")
    assert code == 0 and out.count("::error ") == 3


def test_the_eval_fingerprint_ignores_where_videos_are_cached() -> None:
    from glasskit_eval.commands.ci_outputs import eval_fingerprint

    video = {"size": 10, "sha256": "ab"}
    here = eval_fingerprint({"files": {"cases/a.yaml": "1"}, "videos": {"/home/a/.cache/x.mp4": video}})
    there = eval_fingerprint({"files": {"cases/a.yaml": "1"}, "videos": {"/home/b/.cache/x.mp4": video}})
    assert here == there
    assert here != eval_fingerprint({"files": {"cases/a.yaml": "2"}, "videos": {"/x.mp4": video}})
    assert here != eval_fingerprint({"files": {"cases/a.yaml": "1"}, "videos": {"/x.mp4": {**video, "size": 11}}})


def test_config_run_thresholds_gate_the_merged_run_as_the_unsharded_one(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    path = ci_eval(tmp_path, {})
    # No adapter takes a microsecond or less: the latency gate fails; the adapter reports no cost.
    (path / "config.yaml").write_text("thresholds:\n  max_p95_latency_s: 0.000001\n  max_cost: 5\n")
    code, _out, err = run_cli("run", "--eval-dir", path, "--output-json", tmp_path / "whole.json")
    assert code == 1, err
    whole = read_json(tmp_path / "whole.json")
    assert [(g["name"], g["passed"]) for g in whole["gates"]] == [("max_p95_latency", False), ("max_cost", True)]
    assert all(g["passed"] for t in whole["trials"] for g in t["gates"])
    shards = run_shards(path, 2)
    code, _out, err = run_cli("merge-reports", *shards, "--output-json", tmp_path / "merged.json")
    assert code == 1, err
    merged = read_json(tmp_path / "merged.json")
    assert [(g["name"], g["passed"]) for g in merged["gates"]] == [("max_p95_latency", False), ("max_cost", True)]
    assert merged["trials"][0]["gates"] == whole["trials"][0]["gates"]
    assert read_json(shards[0])["shard"]["thresholds"]["eval"]["max_p95_latency_s"] == 0.000001
    # A shard written before these keys travelled still merges: a missing key is unset.
    for shard in shards:
        old = json.loads(shard.read_text())
        for entry in [old["shard"]["thresholds"]["eval"], *(c["thresholds"] for c in old["shard"]["thresholds"]["cases"])]:
            if entry is not None:
                del entry["max_p95_latency_s"], entry["max_cost"]
        shard.write_text(json.dumps(old))
    code, _out, err = run_cli("merge-reports", *shards, "--output-json", tmp_path / "old.json")
    assert code == 0, err
    assert read_json(tmp_path / "old.json")["gates"] == []
    # A hand-edited limit that is not a number is damage, not a crash.
    edited = json.loads(shards[0].read_text())
    edited["shard"]["thresholds"]["eval"]["max_cost"] = "cheap"
    shards[0].write_text(json.dumps(edited))
    code, _out, err = run_cli("merge-reports", *shards)
    assert (code, err) == (2, f"error: {shards[0]}: its `shard` object is damaged; rerun that shard\n")


ARMS_CONFIG = """\
arms:
  alt: {adapter_config: {unused: 1}}
thresholds:
  min_pass_rate: 0.5
  per_target:
    size:
      min_pass_rate: 0.9
    ghost:
      min_pass_rate: 0.5
"""


@pytest.mark.parametrize("gate_arm", [(), ("--gate-arm", "alt")])
def test_shards_with_arms_merge_to_the_unsharded_runs_gates(eval_dir: Path, gate_arm: tuple[str, ...]) -> None:
    """Per arm, with a per-target gate on a target only one shard runs (door's `size`) and one on a
    target no case declares (`ghost`), which fails in the unsharded run and so in the merged one;
    per-target gates come in their file's order (not alphabetical), in config.yaml and in a case."""
    (eval_dir / "config.yaml").write_text(ARMS_CONFIG)
    door = eval_dir / "cases" / "door.yaml"
    door.write_text(door.read_text() + "thresholds:\n  per_target:\n    size: {min_pass_rate: 0.5}\n"
                    "    idx: {min_pass_rate: 0.5}\n")
    tmp = eval_dir.parent
    options = ("--arm", "all", *gate_arm)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", tmp / "whole.json",
                              *options)
    assert code == 1, err
    shards = run_shards(eval_dir, 2, *options)
    has_size = ["size" in {s[1] for s in read_json(p)["shard"]["selection"]}
                and any(r["target"] == "size" for r in read_json(p)["trials"][0]["results"]) for p in shards]
    assert sorted(has_size) == [False, True]
    code, _out, err = run_cli("merge-reports", *shards, "--output-json", tmp / "merged.json")
    assert code == 1, err
    whole, merged = read_json(tmp / "whole.json"), read_json(tmp / "merged.json")

    def gates(report: dict[str, Any]) -> list[tuple[str, bool, str]]:
        every = [*report["gates"], *(g for t in report["trials"] for g in t["gates"])]
        return [(g["name"], g["passed"], g["message"]) for g in every]

    assert gates(merged) == gates(whole)
    verdicts = {name: passed for name, passed, _m in gates(merged)}
    assert {name.split("/")[0] for name in verdicts} == ({"alt"} if gate_arm else {"control", "alt"})
    names = [name for name, _p, _m in gates(merged) if name.startswith("alt/")]
    assert names.index("alt/eval_size_min_pass_rate") < names.index("alt/eval_ghost_min_pass_rate")
    assert names.index("alt/door_size_min_pass_rate") < names.index("alt/door_idx_min_pass_rate")
    for arm in ("alt",) if gate_arm else ("control", "alt"):
        # door's one size sample raises: an adapter error, and size's pass rate is 0.
        assert verdicts[f"{arm}/eval_size_min_pass_rate"] is False and verdicts[f"{arm}/adapter_errors"] is False
        assert verdicts[f"{arm}/eval_ghost_min_pass_rate"] is False
