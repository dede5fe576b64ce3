"""--save-failures artifacts (rotated to failures/previous/) and hostile values in results (evaluation.failures, evaluation._judge)."""

from __future__ import annotations

from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

from glasskit_eval.evaluation._judge import MAX_MESSAGE
from glasskit_eval.evaluation.failures import FailureSaver

pytestmark = pytest.mark.frames

LONG = "t" * 600
LONG_CASE = f"video: cfr_h264.mp4\ntargets:\n  {LONG}:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"

HOSTILE = """
class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")

class E:
    def evaluate(self, sample, target):
        if sample.timestamp_s == 0.5:
            raise ValueError("x" * 20_000_000)
        raise Unprintable()

def create_evaluator(config):
    return E()
"""


def test_a_600_character_target_id_gets_bounded_unique_artifact_names(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": LONG_CASE}, "def create_evaluator(config):\n    return E()\n"
                         "class E:\n    def evaluate(self, sample, target):\n        return False\n")
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--save-failures", "--output-json", tmp_path / "r.json")
    assert code == 0, out + err
    results = read_json(tmp_path / "r.json")["trials"][0]["results"]
    names = [Path(r["artifact_image"]).name for r in results]
    assert len(set(names)) == 2 and all(len(n) < 120 for n in names)
    assert all(Path(r["artifact_image"]).is_file() and Path(r["artifact_json"]).is_file() for r in results)


def test_huge_and_unprintable_adapter_errors_are_bounded_results(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": LONG_CASE.replace(LONG, "t")}, HOSTILE)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", tmp_path / "r.json")
    assert code == 1
    huge, broken = read_json(tmp_path / "r.json")["trials"][0]["results"]
    assert huge["status"] == "error" and len(huge["reason"]) < MAX_MESSAGE + 200
    assert "more characters not shown" in huge["reason"]
    assert broken["status"] == "error" and "Unprintable: <its message could not be read" in broken["reason"]
    assert len(out) + len(err) < 100_000


def test_an_adapter_config_that_is_a_directory_says_so(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": LONG_CASE.replace(LONG, "t")}, HOSTILE)
    (eval_dir / "adapter.yaml").mkdir()
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "adapter.yaml is a directory" in err


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

import pytest
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
