"""The run command's checks before the first adapter call, and --resume with --output-json."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

from glasskit_eval.errors import OutputError
from glasskit_eval.support.destinations import Destination, check_writable

pytestmark = pytest.mark.frames

CASE = """
video: cfr_h264.mp4
targets:
  lights:
    samples:
    - at: [0.5, 1.0]
      expect: true
"""

#: Leaves a mark when its factory is called; errors on sample 1 until ``heal`` exists.
MARKING = """
from pathlib import Path
HERE = Path(__file__).parent

def create_evaluator(config):
    (HERE / "factory-called").touch()
    return E()

class E:
    def evaluate(self, sample, target):
        if sample.sample_index == 1 and not (HERE / "heal").exists():
            raise RuntimeError("not yet")
        return True
"""


def test_check_writable_creates_parents_and_leaves_no_probe(tmp_path: Path) -> None:
    report = tmp_path / "a" / "b" / "report.json"
    check_writable([Destination(report, "--output-json"), Destination(tmp_path / "art", "--artifacts-dir",
                                                                       directory=True)])
    assert report.parent.is_dir() and not report.exists()
    assert list(report.parent.iterdir()) == [] and list((tmp_path / "art").iterdir()) == []


def test_check_writable_accepts_devices_and_follows_links(tmp_path: Path) -> None:
    check_writable([Destination(Path("/dev/null"), "--output-json")])
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link.json").symlink_to(real / "report.json")
    check_writable([Destination(tmp_path / "link.json", "--output-json")])


@pytest.mark.parametrize("make", ["parent_is_a_file", "path_is_a_directory"])
def test_check_writable_refuses_what_cannot_be_written(tmp_path: Path, make: str) -> None:
    blocker = tmp_path / "blocker"
    if make == "parent_is_a_file":
        blocker.write_text("x")
        target = blocker / "report.json"
    else:
        blocker.mkdir()
        target = blocker
    with pytest.raises(OutputError, match=re.escape(f"--output-json {target}: ")):
        check_writable([Destination(target, "--output-json")])


@pytest.mark.parametrize("option", ["--output-json", "--artifacts-dir", "--html"])
def test_unwritable_destination_stops_the_run_before_the_adapter_exists(tmp_path: Path, option: str) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, MARKING)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    path = blocker if option == "--artifacts-dir" else blocker / "report"
    extra = ["--save-failures"] if option == "--artifacts-dir" else []
    code, out, err = run_cli("run", "--eval-dir", eval_dir, option, path, *extra)
    assert code == 2
    assert err.startswith(f"error: {option} {path}: ")
    assert not (eval_dir / "factory-called").exists()
    assert not (eval_dir / "runs" / "checkpoints").exists() or \
        not any((eval_dir / "runs" / "checkpoints").iterdir())


def test_artifacts_dir_without_save_failures_creates_nothing(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, MARKING)
    (eval_dir / "heal").touch()
    artifacts = tmp_path / "art" / "nested"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--artifacts-dir", artifacts)
    assert code == 0, err
    assert not (tmp_path / "art").exists()
    assert not (eval_dir / "runs" / "failures").exists()


def test_resume_writes_its_report_where_output_json_says(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, MARKING)
    first = tmp_path / "first.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", first)
    assert code == 1, err
    checkpoint = re.search(r"--resume (\S+)`", out)
    assert checkpoint, out
    (eval_dir / "heal").touch()
    second = tmp_path / "elsewhere" / "second.json"
    code, out, err = run_cli("run", "--resume", checkpoint[1], "--output-json", second)
    assert code == 0, err
    assert read_json(second)["success"] is True
    assert read_json(first)["success"] is False  # the first report is left as it was


def test_ctrl_c_says_how_many_samples_finished_and_how_to_resume(tmp_path: Path) -> None:
    from evalkit import interrupt_when_marked

    mark = tmp_path / "mark"
    adapter = f"""
import time
from pathlib import Path

def create_evaluator(config):
    return E()

class E:
    def evaluate(self, sample, target):
        if sample.sample_index == 1:
            Path({str(mark)!r}).touch()
            time.sleep(60)
        return True
"""
    eval_dir = make_eval(tmp_path, {"walk": CASE.replace("[0.5, 1.0]", "[0.5, 1.0, 1.5]")}, adapter)
    code, err = interrupt_when_marked(["run", "--eval-dir", str(eval_dir)], mark)
    assert code == 130
    lines = err.splitlines()
    assert "Eval interrupted by SIGINT." in lines
    assert "1 of 3 samples finished and saved in the checkpoint." in lines
    assert any(line.startswith("Resume with `python -m glasskit_eval run --resume ") for line in lines)
