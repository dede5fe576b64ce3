"""--save-failures artifacts and hostile values in results (glasskit_eval.run.failures, run.judge)."""

from __future__ import annotations

from pathlib import Path

from evalkit import make_eval, read_json, run_cli

from glasskit_eval.run.judge import MAX_MESSAGE

LONG = "t" * 600
CASE = f"video: cfr_h264.mp4\ntargets:\n  {LONG}:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"

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
    eval_dir = make_eval(tmp_path, {"c": CASE}, "def create_evaluator(config):\n    return E()\n"
                         "class E:\n    def evaluate(self, sample, target):\n        return False\n")
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--save-failures", "--output-json", tmp_path / "r.json")
    assert code == 0, out + err
    results = read_json(tmp_path / "r.json")["trials"][0]["results"]
    names = [Path(r["artifact_image"]).name for r in results]
    assert len(set(names)) == 2 and all(len(n) < 120 for n in names)
    assert all(Path(r["artifact_image"]).is_file() and Path(r["artifact_json"]).is_file() for r in results)


def test_huge_and_unprintable_adapter_errors_are_bounded_results(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE.replace(LONG, "t")}, HOSTILE)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", tmp_path / "r.json")
    assert code == 1
    huge, broken = read_json(tmp_path / "r.json")["trials"][0]["results"]
    assert huge["status"] == "error" and len(huge["reason"]) < MAX_MESSAGE + 200
    assert "more characters not shown" in huge["reason"]
    assert broken["status"] == "error" and "Unprintable: <its message could not be read" in broken["reason"]
    assert len(out) + len(err) < 100_000


def test_an_adapter_config_that_is_a_directory_says_so(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE.replace(LONG, "t")}, HOSTILE)
    (eval_dir / "adapter.yaml").mkdir()
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "adapter.yaml is a directory" in err
