"""``run`` checkpoints end to end: resume hints, resume, refusals, exit codes, failure artifacts."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from evalkit import VIDEOS, make_eval, read_json, run_cli

from glasskit_eval.checkpoints.store import FORMAT_VERSION, MANIFEST_NAME, RECORDS_NAME, Checkpoint

pytestmark = pytest.mark.frames

CASE = """
video: cfr_h264.mp4
targets:
  door:
    samples:
    - range: [0, 2]
      expect: true
  lamp:
    samples:
    - at: [0.2, 0.4]
      expect: false
"""

#: Logs every factory call, evaluate call and close; raises where eval/fail.json says, while it exists.
ADAPTER = """
import json, os
HERE = os.path.dirname(os.path.abspath(__file__))

def log(line):
    with open(os.path.join(HERE, "calls.log"), "a") as handle:
        handle.write(line + "\\n")

def rules():
    try:
        with open(os.path.join(HERE, "fail.json")) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}

def create_evaluator(config):
    if rules().get("factory"):
        raise RuntimeError("factory exploded")
    log("create")
    return E()

class E:
    def evaluate(self, sample, target):
        log(f"call {sample.case_name} {target.id} {sample.sample_index}")
        fail = rules()
        if fail.get("all") or sample.sample_index in fail.get("samples", []):
            raise RuntimeError(f"boom at {sample.timestamp_s}")
        return True

    def close(self):
        log("close")
        if rules().get("close"):
            raise RuntimeError("close exploded")
"""


def setup(tmp_path: Path, fail: dict[str, object] | None = None, case: str = CASE) -> Path:
    eval_dir = make_eval(tmp_path, {"a": case}, ADAPTER)
    set_failures(eval_dir, fail)
    return eval_dir


def set_failures(eval_dir: Path, fail: dict[str, object] | None) -> None:
    path = eval_dir / "fail.json"
    if fail is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps(fail))


def calls(eval_dir: Path) -> list[str]:
    log = eval_dir / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)  # each test step reads only its own calls
    return lines


def checkpoint_from(text: str) -> Path:
    """The checkpoint a run's resume hint names (the path is printed once, in the command)."""
    match = re.search(r"^Resume with `python -m glasskit_eval run --resume (\S+)`\.$", text, re.M)
    assert match, text
    return Path(match.group(1))


def checkpoints(eval_dir: Path) -> list[Path]:
    root = eval_dir / "runs" / "checkpoints"
    return sorted(root.iterdir()) if root.exists() else []


def test_keep_going_resume_retries_only_adapter_errors(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [2, 3]})
    report = tmp_path / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report)
    assert code == 1, err
    assert len([c for c in calls(eval_dir) if c.startswith("call")]) == 6
    assert "2 adapter errors can be retried without rerunning completed samples." in out
    path = checkpoint_from(out)
    first = read_json(report)
    assert first["checkpoint"] == {"path": str(path), "resumable_adapter_errors": 2, "resumed": False}

    set_failures(eval_dir, None)
    report.unlink()
    code, out, err = run_cli("run", "--resume", path)
    assert code == 0, out + err
    assert calls(eval_dir) == ["create", "call a door 2", "call a door 3", "close"]
    assert "Case a (2 samples" in out and "Samples: 6 evaluated, 4 passed, 2 failed, 0 errors" in out
    assert "Resume with" not in out
    second = read_json(report)  # the original --output-json, restored from the checkpoint
    assert second["checkpoint"] == {"path": str(path), "resumable_adapter_errors": 0, "resumed": True}
    assert [r["status"] for r in second["trials"][0]["results"]] == ["passed"] * 4 + ["failed"] * 2
    assert second["trials"][0]["results"][4] == first["trials"][0]["results"][4]  # reused as is

    code, _, err = run_cli("run", "--resume", path)
    assert code == 2 and f"checkpoint is already complete: {path}" in err


def test_fail_fast_prints_the_resume_command_and_resume_by_id_finishes(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [2]})
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert code == 2
    assert "Eval failed: adapter failed for a/door sample 2 at 1.0s: RuntimeError: boom at 1.0" in err
    path = checkpoint_from(err)
    assert "can be retried" not in err and not report.exists()
    # Targets are called one after the other, in declaration order: lamp never started.
    assert calls(eval_dir) == ["create", "call a door 0", "call a door 1", "call a door 2", "close"]

    set_failures(eval_dir, None)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--resume", path.name)
    assert code == 0, out + err
    assert calls(eval_dir) == ["create", "call a door 2", "call a door 3", "call a lamp 4", "call a lamp 5",
                               "close"]
    data = read_json(report)
    assert data["checkpoint"]["resumed"] is True and data["summary"]["evaluated_attempts"] == 6


def test_no_resume_command_when_no_adapter_work_completed(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [0]})
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "Eval failed: adapter failed for a/door sample 0" in err
    assert "Resume" not in out + err and checkpoints(eval_dir) == []

    set_failures(eval_dir, {"all": True})
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report)
    assert code == 1
    assert "Resume" not in out + err and checkpoints(eval_dir) == []
    assert read_json(report)["checkpoint"] is None  # error-only checkpoints are discarded

    set_failures(eval_dir, {"factory": True})
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "factory exploded" in err
    assert "Resume" not in out + err and checkpoints(eval_dir) == []


def test_close_error_after_completed_work_keeps_the_checkpoint(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"close": True})
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "close exploded" in err
    path = checkpoint_from(err)
    calls(eval_dir)
    set_failures(eval_dir, None)
    code, out, err = run_cli("run", "--resume", path)
    assert code == 0, out + err
    assert calls(eval_dir) == []  # every result was checkpointed: no adapter needed
    assert "Samples: 6 evaluated, 4 passed, 2 failed" in out


def test_all_ignored_run_keeps_a_complete_checkpoint(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  z:\n    samples:\n    - at: 1\n      expect: true\n      ignore: skip\n"
    eval_dir = make_eval(tmp_path, {"d": case})
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", "x:y", "--output-json", report)
    assert code == 0, out + err
    [path] = checkpoints(eval_dir)
    assert read_json(report)["checkpoint"] == {"path": str(path), "resumable_adapter_errors": 0, "resumed": False}
    assert read_json(path / MANIFEST_NAME)["status"] == "complete"


def test_resume_refuses_overrides(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [3]})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    path = checkpoint_from(out)
    code, _, err = run_cli("run", "--resume", path, "--verbose")
    assert code == 2 and "cannot be combined with overrides (--verbose)" in err
    code, _, err = run_cli("run", "--resume", path, "--concurrency", "2", "--from", "1", "--case", "a")
    assert code == 2 and "(--case, --from, --concurrency)" in err
    code, _, err = run_cli("run", "--resume", path, "--adapter", "other.py:f")
    assert code == 2 and "--adapter" in err
    assert calls(eval_dir).count("create") == 1  # only the original run


@pytest.mark.parametrize("change, message", [
    ("case", "file cases/a.yaml changed"),
    ("broken", "file cases/a.yaml changed"),  # refused as changed, not reported as invalid
    ("video", "video cases/cfr_h264.mp4 changed"),
    ("added", "file cases/b.yaml was added"),
    ("config", "file config.yaml was added"),
])
def test_resume_refuses_changed_inputs(tmp_path: Path, change: str, message: str) -> None:
    eval_dir = setup(tmp_path, {"samples": [3]})
    code, out, _ = run_cli("run", "--eval-dir", eval_dir)
    path = checkpoint_from(_ + out)
    calls(eval_dir)
    if change == "broken":
        (eval_dir / "cases" / "a.yaml").write_text("targets: [oops\n")
    elif change == "case":
        case_file = eval_dir / "cases" / "a.yaml"
        case_file.write_text(case_file.read_text().replace("[0.2, 0.4]", "[0.2, 0.5]"))
    elif change == "video":
        shutil.copy(VIDEOS / "rotate90.mp4", eval_dir / "cases" / "cfr_h264.mp4")
    elif change == "added":
        (eval_dir / "cases" / "b.yaml").write_text(CASE)
    else:
        (eval_dir / "config.yaml").write_text("thresholds:\n  min_pass_rate: 0.9\n")
    code, _, err = run_cli("run", "--resume", path)
    assert code == 2
    assert "its inputs changed since it was written" in err and message in err
    assert "Results from different inputs cannot be mixed" in err
    assert calls(eval_dir) == []


def test_resume_refuses_missing_foreign_and_newer_checkpoints(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [3]})
    code, _, err = run_cli("run", "--eval-dir", eval_dir, "--resume", "run-nothere")
    assert code == 2 and "could not read checkpoint manifest" in err and "run-nothere" in err

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / MANIFEST_NAME).write_text('{"id": "x", "status": "in_progress"}')
    code, _, err = run_cli("run", "--resume", foreign)
    assert code == 2 and "not a glasskit_eval checkpoint manifest" in err

    code, _, err = run_cli("run", "--eval-dir", eval_dir)
    path = checkpoint_from(err)
    manifest = json.loads((path / MANIFEST_NAME).read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    (path / MANIFEST_NAME).write_text(json.dumps(manifest))
    code, _, err = run_cli("run", "--resume", path)
    assert code == 2 and "newer glasskit_eval" in err
    assert "Traceback" not in err


def test_torn_tail_in_a_real_checkpoint_is_ignored(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [3]})
    code, _, err = run_cli("run", "--eval-dir", eval_dir)
    path = checkpoint_from(err)
    calls(eval_dir)
    records = path / RECORDS_NAME
    lines = records.read_bytes().splitlines(keepends=True)
    records.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])  # the last result, cut mid-record
    set_failures(eval_dir, None)
    code, out, err = run_cli("run", "--resume", path)
    assert code == 0, out + err
    # Sample 2's record (the last before the failure at 3) was torn: it is evaluated again.
    assert calls(eval_dir) == ["create", "call a door 2", "call a door 3", "call a lamp 4", "call a lamp 5",
                               "close"]


def test_comparison_errors_are_reused_and_ignored_samples_never_sent(tmp_path: Path) -> None:
    case = CASE.replace("      expect: false\n", "      expect: false\n    - at: 0.6\n      expect: false\n"
                        "      ignore: flaky lamp\n")
    eval_dir = setup(tmp_path, {"samples": [4]}, case=case)
    code, _, err = run_cli("run", "--eval-dir", eval_dir)
    path = checkpoint_from(err)
    calls(eval_dir)
    # A comparator crash recorded by an earlier attempt (it has no public trigger).
    cp = Checkpoint.open(path, "run")
    payload = {"case": "a", "target": "lamp", "target_label": None, "sample_index": 4, "timestamp_s": 0.2,
               "source": "at", "status": "error", "expected": False, "field": None, "compare_mode": None,
               "reason": "comparison_error: ValueError: bad", "observed": True, "observed_value": True,
               "error_kind": "comparison"}
    cp.append((1, "a", "lamp", 4, None), payload, completed=True)
    cp.close()
    set_failures(eval_dir, None)
    code, out, err = run_cli("run", "--resume", path)
    assert code == 1, out + err  # the comparison error fails the adapter_errors gate
    # In declaration order every door sample was done before lamp's first call failed.
    assert calls(eval_dir) == ["create", "call a lamp 5", "close"]
    assert "can be retried" not in out and "Resume with" not in out  # comparison errors are final


def test_resume_with_repeat_skips_finished_trials(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path)
    adapter = eval_dir / "adapter.py"
    # Trial 2 (the second factory call of the first attempt) breaks at sample 3.
    adapter.write_text(adapter.read_text().replace(
        "        fail = rules()\n",
        "        fail = rules()\n        if fail.get('trial2') and STATE['n'] == 2 and sample.sample_index == 3:\n"
        "            raise RuntimeError('trial two')\n").replace(
        "    log(\"create\")\n", "    log(\"create\")\n    STATE['n'] += 1\n") + "STATE = {'n': 0}\n")
    set_failures(eval_dir, {"trial2": True})
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--repeat", "2", "--output-json", report)
    assert code == 2 and "trial two" in err
    path = checkpoint_from(err)
    log = calls(eval_dir)
    assert log.count("create") == 2 and log.count("close") == 2
    set_failures(eval_dir, None)
    code, out, err = run_cli("run", "--resume", path)
    assert code == 0, out + err
    assert calls(eval_dir) == ["create", "call a door 3", "call a lamp 4", "call a lamp 5", "close"]
    assert "Trial 1/2" not in out and "Trial 2/2" in out
    data = read_json(report)
    assert [t["summary"]["evaluated"] for t in data["trials"]] == [6, 6]
    assert data["summary"]["flaky_samples"] == 0


def test_save_failures_names_and_records_like_upstream(tmp_path: Path) -> None:
    eval_dir = setup(tmp_path, {"samples": [3]})
    artifacts = tmp_path / "artifacts"
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--save-failures",
                             "--artifacts-dir", artifacts, "--output-json", report)
    assert code == 1, err
    folder = artifacts / "failures" / "trial-001"
    assert sorted(p.name for p in folder.iterdir()) == [
        "a_door_00003_1.500s.jpg", "a_door_00003_1.500s.json", "a_lamp_00004_0.200s.jpg",
        "a_lamp_00004_0.200s.json", "a_lamp_00005_0.400s.jpg", "a_lamp_00005_0.400s.json"]
    results = read_json(report)["trials"][0]["results"]
    error = results[3]
    assert error["artifact_image"] == str(folder / "a_door_00003_1.500s.jpg")
    record = read_json(folder / "a_door_00003_1.500s.json")
    assert record == {**error, "artifact_image": None, "artifact_json": None, "trial": 1}
    assert results[0]["artifact_image"] is None  # passed: no artifact

    # A resume keeps the artifacts of reused failures and replaces the retried error's.
    path = checkpoint_from(out)
    set_failures(eval_dir, None)
    (folder / "a_door_00003_1.500s.jpg").unlink()
    (folder / "a_door_00003_1.500s.json").unlink()
    code, out, err = run_cli("run", "--resume", path)
    assert code == 0, out + err
    results = read_json(report)["trials"][0]["results"]
    assert results[3]["status"] == "passed" and results[3]["artifact_image"] is None
    assert results[4]["artifact_json"] == str(folder / "a_lamp_00004_0.200s.json")
    assert not (folder / "a_door_00003_1.500s.jpg").exists()


def test_checkpoints_can_live_outside_the_eval_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A read-only eval directory (a vendored checkout, a mounted volume) still runs and resumes.
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"
    adapter = ("import os\nclass E:\n    def evaluate(self, sample, target):\n"
               "        if sample.timestamp_s == 1.0 and not os.environ.get('OK'):\n"
               "            raise RuntimeError('down')\n        return True\n"
               "def create_evaluator(config):\n    return E()\n")
    eval_dir = make_eval(tmp_path, {"c": case}, adapter)
    elsewhere = tmp_path / "checkpoints"
    monkeypatch.setenv("GLASSKIT_EVAL_CHECKPOINT_DIR", str(elsewhere))
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert err.startswith(f"Checkpoint: {elsewhere}/run-")  # printed before the first call
    assert not (eval_dir / "runs").exists()
    checkpoint_id = Path(err.splitlines()[0].split(": ", 1)[1]).name
    monkeypatch.setenv("OK", "1")
    monkeypatch.delenv("GLASSKIT_EVAL_CHECKPOINT_DIR")
    code, out, err = run_cli("run", "--resume", checkpoint_id, "--checkpoint-dir", elsewhere, "--eval-dir", eval_dir)
    assert code == 0, out + err
