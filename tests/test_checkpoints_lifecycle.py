"""The one checkpoint lifecycle shared by run and seed (glasskit_eval.checkpoints.lifecycle)."""

from __future__ import annotations

from pathlib import Path

import pytest

from glasskit_eval.checkpoints.lifecycle import CheckpointedCommand, resume_command
from glasskit_eval.checkpoints.store import COMPLETE, read_manifest
from glasskit_eval.commands.requests import RunRequest, SeedRequest
from glasskit_eval.errors import AdapterError, CheckpointError, CommandStopped, ExitCode, UsageError
from glasskit_eval.results import ErrorKind, SampleResult, Status


def result(status: Status, index: int = 0, kind: ErrorKind | None = None) -> SampleResult:
    return SampleResult(case="c", target="t", target_label=None, sample_index=index, timestamp_s=0.5,
                        source="at", status=status, expected=True, field=None, compare_mode=None, reason="x",
                        error_kind=kind)


def new(tmp_path: Path, kind: str = "run") -> CheckpointedCommand:
    life = CheckpointedCommand(kind, "Eval" if kind == "run" else "Seed")
    life.create(tmp_path, {"eval_dir": str(tmp_path)}, {"files": {}, "videos": {}}, total=3)
    return life


def test_a_stop_without_judged_work_deletes_the_new_checkpoint(tmp_path: Path) -> None:
    life = new(tmp_path)
    life.record(1, result(Status.ERROR, kind=ErrorKind.ADAPTER))
    stop = life.stopped(AdapterError("boom"))
    assert isinstance(stop, CommandStopped) and stop.exit_code == ExitCode.ERROR
    assert stop.lines == ["Eval failed: boom"]
    assert life.checkpoint is not None and not life.checkpoint.path.exists()


def test_a_stop_with_judged_work_keeps_it_and_says_how_to_resume(tmp_path: Path) -> None:
    life = new(tmp_path, "seed")
    life.record(1, result(Status.PASSED))
    assert life.checkpoint is not None
    life.checkpoint.wait()
    stop = life.stopped(AdapterError("boom"))
    path = life.checkpoint.path
    assert stop.lines == ["Seed failed: boom", f"Resume with `{resume_command('seed', path)}`."]
    assert path.exists()
    reopened = CheckpointedCommand("seed", "Seed")
    assert reopened.open(path)["eval_dir"] == str(tmp_path)
    assert reopened.previous[(1, "c", "t", 0, None)].status is Status.PASSED and reopened.has_completed_work
    reopened.finish(complete=True)
    assert read_manifest(path).status == COMPLETE


def test_guard_turns_errors_after_the_checkpoint_into_a_reported_stop(tmp_path: Path) -> None:
    life = CheckpointedCommand("run", "Eval")
    with pytest.raises(UsageError), life.guard():
        raise UsageError("before any checkpoint: a plain error")
    life = CheckpointedCommand("run", "Eval")
    with pytest.raises(CommandStopped) as stopped, life.guard():
        life.create(tmp_path, {"eval_dir": str(tmp_path)}, {}, total=1)
        raise KeyboardInterrupt
    assert stopped.value.lines == ["Eval interrupted by SIGINT or SIGTERM.",
                                   "0 of 1 sample finished and saved in the checkpoint."]


def test_a_damaged_record_is_a_checkpoint_error(tmp_path: Path) -> None:
    life = new(tmp_path)
    assert life.checkpoint is not None
    life.checkpoint.append((1, "c", "t", 0, None), {"case": "c", "status": "bogus"}, completed=True)
    life.finish(complete=False)
    with pytest.raises(CheckpointError, match="damaged"):
        CheckpointedCommand("run", "Eval").open(life.checkpoint.path)


@pytest.mark.parametrize("change", [
    {"concurrency": 0}, {"repeat": -3}, {"repeat": True}, {"min_pass_rate": 1.5}, {"targets": "door"},
    {"at": ["soon"]}, {"keep_going": "yes"}, {"surprise": 1},
])
def test_run_requests_are_restored_strictly(tmp_path: Path, change: dict[str, object]) -> None:
    data = RunRequest.of(eval_dir="/e", at=("3/2",)).to_json() | change
    with pytest.raises(CheckpointError):
        RunRequest.from_json(data, tmp_path / "manifest.json")


def test_run_request_round_trip() -> None:
    request = RunRequest.of(eval_dir="/e", targets=("a", "b"), at=("3/2",), concurrency=4, min_pass_rate=0.5)
    assert RunRequest.from_json(request.to_json(), Path("m")) == request
    assert request.filters().at[0] * 2 == 3


@pytest.mark.parametrize("change", [{"concurrency": 0}, {"replace": 1}, {"unknown": True}, {"eval_dir": None}])
def test_seed_requests_are_restored_strictly(tmp_path: Path, change: dict[str, object]) -> None:
    data = SeedRequest(eval_dir="/e").to_json() | change
    with pytest.raises(CheckpointError):
        SeedRequest.from_json(data, tmp_path / "manifest.json")
    assert SeedRequest.from_json(SeedRequest.of(eval_dir="/e", targets=("a",)).to_json(), tmp_path) == SeedRequest(
        eval_dir="/e", targets=("a",))
