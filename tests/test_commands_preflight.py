"""Checks before the first paid call: a bad --baseline or job summary costs no adapter call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

CASE = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      field: ok\n      expect: true\n"

#: Logs every call; fails while the file `fail` exists beside it (to leave a checkpoint to resume).
ADAPTER = """
from pathlib import Path

HERE = Path(__file__).parent

def create_evaluator(config):
    return Logger()

class Logger:
    def evaluate(self, sample, target):
        with (HERE / "calls.log").open("a") as log:
            log.write(f"{sample.timestamp_s}\\n")
        if sample.timestamp_s == 1.0 and (HERE / "fail").exists():
            raise RuntimeError("model down")
        return {"ok": True}
"""


@pytest.fixture
def eval_dir(tmp_path: Path) -> Path:
    return make_eval(tmp_path, {"case": CASE}, ADAPTER)


def calls(eval_dir: Path) -> int:
    log = eval_dir / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such report file"),
    ("{not json", "not valid JSON"),
    (json.dumps({"summary": {}}), "not a glasskit_eval run report"),
    (json.dumps({"report_type": "eval_run", "schema_version": 1, "summary": {}, "trials": []}),
     "summary: lacks `attempt_pass_rate`"),
])
def test_a_bad_baseline_is_refused_before_any_adapter_call(eval_dir: Path, tmp_path: Path,
                                                           content: str | None, message: str) -> None:
    baseline = tmp_path / "previous.json"
    if content is not None:
        baseline.write_text(content)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--baseline", baseline)
    assert code == 2 and message in err, err
    assert calls(eval_dir) == 0


@pytest.mark.parametrize("where", ["folder", "/dev/full"])
def test_an_unwritable_job_summary_is_refused_before_any_adapter_call(eval_dir: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      where: str) -> None:
    if where == "/dev/full" and not Path(where).exists():
        pytest.skip("no /dev/full here")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    # A folder cannot be opened for appending; /dev/full opens, and refuses every write.
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path) if where == "folder" else where)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "cannot append the job summary to GITHUB_STEP_SUMMARY" in err, err
    assert "fix it before the run calls the adapter" in err and "Traceback" not in err
    assert calls(eval_dir) == 0


def test_resume_accepts_baseline_to_point_at_the_file_again(eval_dir: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", first)
    assert code == 0, err
    moved = tmp_path / "elsewhere" / "baseline.json"
    moved.parent.mkdir()
    (eval_dir / "fail").touch()
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--baseline", first, "--output-json",
                              tmp_path / "second.json", "--concurrency", "1")
    assert code == 2, err
    checkpoint = re.search(r"Checkpoint: (\S+)", err)
    assert checkpoint is not None, err
    first.rename(moved)
    (eval_dir / "fail").unlink()
    code, out, err = run_cli("run", "--resume", checkpoint.group(1), "--baseline", moved)
    assert code == 0, err
    report = read_json(tmp_path / "second.json")
    assert report["baseline"]["path"].endswith("baseline.json") or "baseline.json" in json.dumps(report["baseline"])
