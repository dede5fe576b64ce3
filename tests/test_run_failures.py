"""--save-failures: each run's artifacts replace the last run's, which move to failures/previous/."""

from __future__ import annotations

from pathlib import Path

from evalkit import make_eval, read_json, run_cli

from glasskit_eval.run.failures import FailureSaver

CASE = """
video: cfr_h264.mp4
targets:
  lights:
    samples:
    - at: [0.5, 1.0]
      expect: true
"""

#: Fails the samples whose times are listed in fail.txt next to it.
CHOOSY = """
from pathlib import Path
HERE = Path(__file__).parent

def create_evaluator(config):
    return E()

class E:
    def evaluate(self, sample, target):
        return str(sample.timestamp_s) not in (HERE / "fail.txt").read_text().split()
"""


def test_rotate_keeps_one_generation(tmp_path: Path) -> None:
    saver = FailureSaver(tmp_path)
    assert saver.rotate() == []
    (saver.base / "trial-001").mkdir(parents=True)
    (saver.base / "trial-001" / "old.json").write_text("1")
    (saver.base / "previous" / "trial-001").mkdir(parents=True)
    (saver.base / "previous" / "trial-001" / "older.json").write_text("0")
    assert saver.rotate() == [saver.base / "previous" / "trial-001"]
    assert sorted(p.name for p in (saver.base / "previous" / "trial-001").iterdir()) == ["old.json"]
    assert not (saver.base / "trial-001").exists()


def test_a_new_run_moves_the_last_runs_artifacts_to_previous(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, CHOOSY)
    failures = eval_dir / "runs" / "failures"
    (eval_dir / "fail.txt").write_text("0.5")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--save-failures")
    assert code == 0, err
    assert sorted(p.suffix for p in (failures / "trial-001").iterdir()) == [".jpg", ".json"]
    first = sorted(p.name for p in (failures / "trial-001").iterdir())

    (eval_dir / "fail.txt").write_text("1.0")
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--save-failures", "--output-json", report)
    assert code == 0, err
    now = sorted(p.name for p in (failures / "trial-001").iterdir())
    assert now != first and all("1.000s" in name for name in now)
    assert sorted(p.name for p in (failures / "previous" / "trial-001").iterdir()) == first
    failed = [r for r in read_json(report)["trials"][0]["results"] if r["status"] == "failed"]
    assert Path(failed[0]["artifact_json"]).exists()

    (eval_dir / "fail.txt").write_text("")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--save-failures")
    assert code == 0, err
    assert not (failures / "trial-001").exists()  # a clean run leaves no stale artifacts behind
    assert sorted(p.name for p in (failures / "previous" / "trial-001").iterdir()) == now
