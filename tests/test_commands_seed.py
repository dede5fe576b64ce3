"""End-to-end `seed`: proposals, block splitting, minimal-diff writes, keep-going and resume."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
import yaml
from evalkit import TESTS, make_eval, run_cli

#: A labeling adapter: the frame index read from the pixels decides the answer.
LABELER = f"""
import json, os, sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

LOG = os.environ.get("SEED_TEST_LOG")
FAIL_AT = {{float(x) for x in os.environ.get("SEED_TEST_FAIL_AT", "").split(",") if x}}

def create_evaluator(config):
    return Labeler()

class Labeler:
    def evaluate(self, sample, target):
        if LOG:
            with open(LOG, "a") as handle:
                handle.write(json.dumps([target.id, sample.timestamp_s]) + "\\n")
        if sample.timestamp_s in FAIL_AT:
            raise RuntimeError(f"flaky backend at {{sample.timestamp_s}}")
        index = read_frame_index(sample.image)
        return {{"result": {{"open": index >= 10, "index": index}}, "meta": "x"}}
"""

CASE = """\
# Door case: labels proposed by seed.
video: cfr_h264.mp4
targets:
  door:   # the door target
    sample_defaults:
      field: result.open
    samples:
    # first second closed, then open
    - range: [0.0, 1.9]
      every_s: 0.5
      comment: seeded by the labeler
    - at: 1.95
      expect: true   # hand label, keep
  index:
    samples:
    - at: [1.5, 0.2, 0.4]
      field: result.index
    - at: 1.9
      ignore: motion blur
"""


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def seed_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail_at: str = "") -> Path:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("SEED_TEST_LOG", str(log))
    monkeypatch.setenv("SEED_TEST_FAIL_AT", fail_at)
    return log


def calls(log: Path) -> list[list[object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_seed_fills_drafts_splits_blocks_and_keeps_the_rest_byte_for_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = seed_env(monkeypatch, tmp_path)
    eval_dir = make_eval(tmp_path, {"door": CASE}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--verbose")
    assert code == 0, out + err
    after = path.read_text()
    data = yaml.safe_load(after)
    door = data["targets"]["door"]["samples"]
    assert door[0] == {"range": [0.0, 1.0], "every_s": 0.5, "comment": "seeded by the labeler", "expect": False}
    assert door[1] == {"range": [1.0, 1.9], "every_s": 0.5, "comment": "seeded by the labeler", "expect": True}
    assert door[2] == {"at": 1.95, "expect": True}
    index = data["targets"]["index"]["samples"]
    assert index[0] == {"at": [0.2, 0.4, 1.5], "field": "result.index", "expect": 2} or \
        [b["expect"] for b in index[:3]] == [2, 4, 15]
    assert index[-1] == {"at": 1.9, "ignore": "motion blur"}
    # Everything outside the edited blocks survives: comments, the hand label and its comment.
    for line in ("# Door case: labels proposed by seed.", "  door:   # the door target",
                 "    # first second closed, then open", "      expect: true   # hand label, keep"):
        assert line in after
    removed = [line for line in changed_lines(CASE, after) if line.startswith("-")]
    assert all("range" in line or "at:" in line or "every_s" in line or "comment" in line
               or "field" in line for line in removed), removed
    # The ignored sample was never sent; every draft sample exactly once.
    assert sorted(map(tuple, calls(log))) == sorted(
        [("door", t) for t in (0.0, 0.5, 1.0, 1.5)] + [("index", t) for t in (0.2, 0.4, 1.5)])
    assert "door/door @0.5s -> false" in out
    assert "2 split" in out or "split" in out
    # The seeded eval is runnable and passes with the same labeler.
    assert run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "1")[0] == 0


def test_nothing_to_seed_exits_0_without_calling_the_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = seed_env(monkeypatch, tmp_path)
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: 1\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, LABELER)
    code, out, _ = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0 and "Nothing to seed" in out
    assert calls(log) == []


def test_replace_and_target_scoping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = seed_env(monkeypatch, tmp_path)
    case = ("video: cfr_h264.mp4\ntargets:\n  a:\n    samples:\n    - at: 0.5\n      field: result.index\n"
            "      expect: 99\n  b:\n    samples:\n    - at: 0.7\n      field: result.index\n      expect: 98\n")
    eval_dir = make_eval(tmp_path, {"c": case}, LABELER)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--replace", "--target", "a")
    assert code == 0, out + err
    data = yaml.safe_load((eval_dir / "cases" / "c.yaml").read_text())
    assert data["targets"]["a"]["samples"][0]["expect"] == 5
    assert data["targets"]["b"]["samples"][0]["expect"] == 98
    assert calls(log) == [["a", 0.5]]
    code, _, err = run_cli("seed", "--eval-dir", eval_dir, "--target", "zzz")
    assert code == 2 and "unknown target" in err


def test_keep_going_leaves_the_file_alone_and_resume_finishes_only_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = seed_env(monkeypatch, tmp_path, fail_at="1.0")
    eval_dir = make_eval(tmp_path, {"door": CASE}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--keep-going")
    assert code == 1, out + err
    assert path.read_text() == CASE
    assert "flaky backend at 1.0" in out
    resume = next(line for line in out.splitlines() if line.startswith("Resume with"))
    checkpoint = resume.split("--resume ", 1)[1].rstrip("`.")
    first_calls = len(calls(log))
    monkeypatch.setenv("SEED_TEST_FAIL_AT", "")
    code, out, err = run_cli("seed", "--resume", checkpoint)
    assert code == 0, out + err
    assert calls(log)[first_calls:] == [["door", 1.0]]
    assert yaml.safe_load(path.read_text())["targets"]["door"]["samples"][1]["expect"] is True


def test_an_observation_missing_the_field_exits_2_and_leaves_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, tmp_path)
    # The labeler answers result.open and result.index, never result.shut.
    case = CASE.replace("field: result.open", "field: result.shut")
    eval_dir = make_eval(tmp_path, {"door": case}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 2, out + err
    assert path.read_bytes() == case.encode()
    assert "observations lack the configured field (first: door/door @0s adapter observation is missing " \
        "configured field: result.shut); case files were left unchanged" in err


def test_keep_going_makes_an_observation_missing_the_field_an_incomplete_seed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As upstream: --keep-going attempted the whole scope, so the expectations left are an
    # incomplete seed (exit 1), not an aborted one (exit 2); the file is left as it was.
    seed_env(monkeypatch, tmp_path)
    case = CASE.replace("field: result.open", "field: result.shut")
    eval_dir = make_eval(tmp_path, {"door": case}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--keep-going")
    assert code == 1, out + err
    assert path.read_bytes() == case.encode()
    assert "ERROR door/door @0s field_error: adapter observation is missing configured field: result.shut" in out
    assert "4 observations lack the configured field" in out
    assert "Seed incomplete: 4 expectations could not be proposed; case files were left unchanged." in out


def test_fail_fast_prints_resume_only_when_work_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, tmp_path, fail_at="0.0")
    eval_dir = make_eval(tmp_path, {"door": CASE}, LABELER)
    code, _, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 2 and "flaky backend at 0.0" in err
    assert "--resume" not in err  # nothing had completed
    assert not list((eval_dir / "runs" / "checkpoints").glob("seed-*"))
    monkeypatch.setenv("SEED_TEST_FAIL_AT", "1.5")
    code, _, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 2 and "--resume" in err


def test_resume_refuses_overrides_and_changed_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, tmp_path, fail_at="1.5")
    eval_dir = make_eval(tmp_path, {"door": CASE}, LABELER)
    code, _, err = run_cli("seed", "--eval-dir", eval_dir)
    checkpoint = err.split("--resume ", 1)[1].split("`")[0]
    code, _, err = run_cli("seed", "--resume", checkpoint, "--replace")
    assert code == 2 and "cannot be combined" in err
    path = eval_dir / "cases" / "door.yaml"
    path.write_text(CASE.replace("# Door case", "# Changed door case"))
    code, _, err = run_cli("seed", "--resume", checkpoint)
    assert code == 2 and "changed" in err


def test_crash_during_the_write_leaves_the_case_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, tmp_path)
    eval_dir = make_eval(tmp_path, {"door": CASE}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    import glasskit_eval.cases.write as casewrite

    real_replace = casewrite.os.replace

    def power_cut(src: str, dst: str) -> None:
        if str(dst) == str(path):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    # A fault we cannot cause for real: the rename failing after the temp file was written.
    monkeypatch.setattr("os.replace", power_cut)
    code, _, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 2 and "left unchanged" in err
    assert path.read_text() == CASE
    assert sorted(p.name for p in path.parent.iterdir()) == ["cfr_h264.mp4", "door.yaml"]


def test_batch_adapter_receives_only_the_samples_that_need_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = tmp_path / "batches.json"
    adapter = f"""
        import json
        def create_evaluator(config):
            return Batch()
        class Batch:
            def evaluate_many(self, samples, target):
                with open({str(seen)!r}, "a") as handle:
                    handle.write(json.dumps([target.id, [s.timestamp_s for s in samples]]) + "\\n")
                return [{{"result": {{"open": s.frame_index >= 10, "index": s.frame_index}}}} for s in samples]
        """
    eval_dir = make_eval(tmp_path, {"door": CASE}, adapter)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0, out + err
    batches = [json.loads(line) for line in seen.read_text().splitlines()]
    assert batches == [["door", [0.0, 0.5, 1.0, 1.5]], ["index", [0.2, 0.4, 1.5]]]
    data = yaml.safe_load((eval_dir / "cases" / "door.yaml").read_text())
    assert [b.get("expect") for b in data["targets"]["index"]["samples"]] == [2, 4, 15, None]


def test_seed_with_a_command_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex
    import sys

    log = seed_env(monkeypatch, tmp_path)
    eval_dir = make_eval(tmp_path, {"door": CASE}, LABELER)
    command = shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                          f"{eval_dir}/adapter.py:create_evaluator"])
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--adapter-command", command, "--concurrency", "2")
    assert code == 0, out + err
    data = yaml.safe_load((eval_dir / "cases" / "door.yaml").read_text())
    assert [b.get("expect") for b in data["targets"]["door"]["samples"]] == [False, True, True]
    assert len(calls(log)) == 7


INTERRUPTIBLE = LABELER.replace(
    "        index = read_frame_index(sample.image)",
    "        if sample.timestamp_s == 1.5 and not os.environ.get('SEED_TEST_NO_HANG'):\n"
    "            open(os.environ['SEED_TEST_HANG_MARK'], 'w').close()\n"
    "            import time\n"
    "            time.sleep(600)\n"
    "        index = read_frame_index(sample.image)")


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_interrupt_keeps_completed_proposals_and_resume_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 signame: str) -> None:
    # SIGTERM (a CI runner cancelling the job) takes the same orderly path as Ctrl+C.
    import signal

    from evalkit import interrupt_when_marked

    log = seed_env(monkeypatch, tmp_path)
    mark = tmp_path / "hanging"
    monkeypatch.setenv("SEED_TEST_HANG_MARK", str(mark))
    eval_dir = make_eval(tmp_path, {"door": CASE}, INTERRUPTIBLE)
    code, err = interrupt_when_marked(["seed", "--eval-dir", str(eval_dir)], mark, getattr(signal, signame))
    assert code == 130, err
    assert f"Seed interrupted by {signame}" in err or "Seed interrupted by SIGINT or SIGTERM" in err, err
    assert (eval_dir / "cases" / "door.yaml").read_text() == CASE
    checkpoint = err.split("--resume ", 1)[1].split("`")[0]
    before = len(calls(log))
    monkeypatch.setenv("SEED_TEST_NO_HANG", "1")
    code, out, err = run_cli("seed", "--resume", checkpoint)
    assert code == 0, out + err
    # Only the interrupted sample and the ones never started were evaluated again.
    assert len(calls(log)) - before == 7 - (before - 1)
    assert yaml.safe_load((eval_dir / "cases" / "door.yaml").read_text())["targets"]["door"]["samples"][1][
        "expect"] is True


# --- writers racing: edits made while seed runs are kept, or the write is refused -----------

RACE_CASE = """\
video: cfr_h264.mp4
targets:
  a:
    samples:
    - at: [0.5, 1.0]
  b:
    samples:
    - at: [0.5]
      expect: old   # hand label
"""

#: Edits the case file (as an editor or the review page would) during its first call.
EDITING_LABELER = """
import os, pathlib

EDIT = os.environ["SEED_TEST_EDIT"]  # "other" or "same"
done = []

def create_evaluator(config):
    return Labeler(config.eval_dir / "cases" / "race.yaml")

class Labeler:
    def __init__(self, path):
        self.path = path

    def evaluate(self, sample, target):
        if not done:
            done.append(1)
            text = self.path.read_text()
            if EDIT == "other":
                text = text.replace("expect: old", "expect: edited meanwhile")
            else:
                text = text.replace("    - at: [0.5, 1.0]", "    - at: [0.5, 1.0]\\n      comment: mine")
            self.path.write_text(text)
        return "seeded"
"""


def test_an_edit_to_another_target_while_seeding_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEED_TEST_EDIT", "other")
    eval_dir = make_eval(tmp_path, {"race": RACE_CASE}, EDITING_LABELER)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--target", "a")
    assert code == 0, out + err
    text = (eval_dir / "cases" / "race.yaml").read_text()
    assert "expect: edited meanwhile" in text and "# hand label" in text
    assert yaml.safe_load(text)["targets"]["a"]["samples"] == [{"at": [0.5, 1.0], "expect": "seeded"}]


def test_an_edit_to_the_seeded_target_is_a_conflict_not_an_overwrite(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEED_TEST_EDIT", "same")
    eval_dir = make_eval(tmp_path, {"race": RACE_CASE}, EDITING_LABELER)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--target", "a")
    assert code == 2, out + err
    text = (eval_dir / "cases" / "race.yaml").read_text()
    assert "comment: mine" in text and "seeded" not in text
    assert "changed on disk while this command ran: the samples of 'a' were edited" in err
    assert "seed --resume" in err  # the proposals are kept in the checkpoint


BARRIER_LABELER = """
import os, pathlib, time

def create_evaluator(config):
    return Labeler()

class Labeler:
    def evaluate(self, sample, target):
        # Both seeds are calling their adapter before either writes: their writes race.
        marks = pathlib.Path(os.environ["SEED_TEST_BARRIER"])
        (marks / target.id).touch()
        deadline = time.monotonic() + 30
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return "by " + target.id
"""


def test_two_seeds_of_different_targets_at_once_keep_both(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from evalkit import ROOT

    eval_dir = make_eval(tmp_path, {"race": RACE_CASE.replace("      expect: old   # hand label\n", "")},
                         BARRIER_LABELER)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "SEED_TEST_BARRIER": str(barrier)}
    procs = [subprocess.Popen([sys.executable, "-m", "glasskit_eval", "seed", "--eval-dir", str(eval_dir),
                               "--target", t], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for t in ("a", "b")]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    data = yaml.safe_load((eval_dir / "cases" / "race.yaml").read_text())["targets"]
    assert data["a"]["samples"][0]["expect"] == "by a" and data["b"]["samples"][0]["expect"] == "by b"


def test_split_blocks_keep_their_comments_and_one_time_is_written_as_review_writes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, tmp_path)
    case = ("video: cfr_h264.mp4\ntargets:\n  door:\n    sample_defaults:\n      field: result.open\n"
            "    samples:\n"
            "    - at: [0.2, 1.5]   # A: the early check\n"
            "    - at: [0.4, 1.7]   # B: the second check\n"
            "      # B: still about the second\n"
            "    - range: [0.5, 1.5]   # C: the middle\n"
            "      every_s: 0.5\n")
    eval_dir = make_eval(tmp_path, {"door": case}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0, out + err
    assert path.read_text().split("    samples:\n")[1] == (
        "    - at: 0.2   # A: the early check\n"
        "      expect: false\n"
        "    - at: 1.5\n"
        "      expect: true\n"
        "    - at: 0.4   # B: the second check\n"
        "      expect: false\n"
        "      # B: still about the second\n"
        "    - at: 1.7\n"
        "      expect: true\n"
        "    - range: [0.5, 1.0]   # C: the middle\n"
        "      every_s: 0.5\n"
        "      expect: false\n"
        "    - range: [1.0, 1.5]\n"
        "      every_s: 0.5\n"
        "      expect: true\n")
    # The last line says what to do next, with the eval directory as given.
    assert out.rstrip().splitlines()[-1] == (
        f"Next: check the proposed labels frame by frame with `python -m glasskit_eval review --eval-dir {eval_dir}`,"
        " then run the eval.")


def test_seed_says_when_nothing_changed_and_leaves_the_file_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, tmp_path)
    case = ("video: cfr_h264.mp4\ntargets:\n  a:\n    samples:\n    - at: 0.5\n      field: result.index\n"
            "      expect: 5\n")
    eval_dir = make_eval(tmp_path, {"c": case}, LABELER)
    path = eval_dir / "cases" / "c.yaml"
    before = path.stat().st_mtime_ns
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--replace")
    assert code == 0, out + err
    assert "Nothing changed in c: the file already holds the 1 proposed values" in out
    assert "Seeded" not in out and "Next:" not in out
    assert path.read_text() == case and path.stat().st_mtime_ns == before


CLIP_CASE = """\
video: cfr_h264.mp4
sample_defaults:
  clip: {before_s: 0.4, every_s: 0.2}
targets:
  door:
    sample_defaults:
      field: result.open
    samples:
    - range: [0.5, 1.9]
      every_s: 0.5
      clip: {before_s: 0.2, after_s: 0.1}   # every frame around t
      comment: the door swings
    - at: 1.95
      clip: null
      expect: true
  index:
    samples:
    - at: [0.6, 1.2]
      field: result.index
"""


def test_seed_on_clip_samples_labels_the_anchor_and_keeps_every_clip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = seed_env(monkeypatch, tmp_path)
    eval_dir = make_eval(tmp_path, {"door": CLIP_CASE}, LABELER)
    path = eval_dir / "cases" / "door.yaml"
    code, out, err = run_cli("seed", "--eval-dir", eval_dir)
    assert code == 0, out + err
    after = path.read_text()
    door = yaml.safe_load(after)["targets"]["door"]["samples"]
    clip = {"before_s": 0.2, "after_s": 0.1}
    # Split by value, each new block keeps the block's clip; the cleared clip stays cleared.
    assert door == [{"range": [0.5, 1.0], "every_s": 0.5, "clip": clip, "comment": "the door swings", "expect": False},
                    {"range": [1.0, 1.9], "every_s": 0.5, "clip": clip, "comment": "the door swings", "expect": True},
                    {"at": 1.95, "clip": None, "expect": True}]
    assert "      clip: {before_s: 0.2, after_s: 0.1}   # every frame around t" in after
    # An inherited clip stays inherited: the proposals are the anchors' frames (read from the pixels).
    index = yaml.safe_load(after)["targets"]["index"]["samples"]
    assert [b.get("expect") for b in index] == [6, 12] and all("clip" not in b for b in index)
    assert after.startswith("video: cfr_h264.mp4\nsample_defaults:\n  clip: {before_s: 0.4, every_s: 0.2}\n")
    assert sorted(map(tuple, calls(log))) == sorted(
        [("door", t) for t in (0.5, 1.0, 1.5)] + [("index", t) for t in (0.6, 1.2)])
    assert run_cli("validate", "--eval-dir", eval_dir)[0] == 0
    assert run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "1")[0] == 0


#: Proposes the clip's frames as the adapter got them: indexes, requested times, indexes read from the pixels.
CLIP_LABELER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Labeler()

class Labeler:
    def evaluate(self, sample, target):
        return {{"frames": {{"index": [f.frame_index for f in sample.frames],
                             "time": [f.timestamp_s for f in sample.frames],
                             "pixels": [read_frame_index(f.image) for f in sample.frames],
                             "anchor": read_frame_index(sample.image)}}}}
"""

CLIP_SEED_CASE = """\
video: cfr_h264.mp4
sample_defaults:
  clip: {before_s: 0.4, every_s: 0.2}
  field: frames
targets:
  around:
    samples:
    - at: [0.5, 1.5]
      clip: {before_s: 0.2, after_s: 0.1}
  inherited:
    samples:
    - at: [0.6, 1.2]
  cleared:
    samples:
    - at: 1.9
      clip: null
"""


@pytest.mark.parametrize("kind", ["python", "protocol_server"])
def test_seed_adapters_receive_every_clip_frame(tmp_path: Path, kind: str) -> None:
    import shlex
    import sys

    eval_dir = make_eval(tmp_path, {"c": CLIP_SEED_CASE}, CLIP_LABELER)
    extra: list[str] = []
    if kind == "protocol_server":
        extra = ["--adapter-command", shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                                                  f"{eval_dir / 'adapter.py'}:create_evaluator"])]
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--concurrency", "2", *extra)
    assert code == 0, out + err
    written = yaml.safe_load((eval_dir / "cases" / "c.yaml").read_text())["targets"]

    def proposals(target: str) -> list[dict[str, object]]:
        return [block["expect"] for block in written[target]["samples"]]

    # 10 fps: every frame of [t-0.2, t+0.1]; the grid t-0.4, t-0.2, t; a cleared clip is the anchor alone.
    assert proposals("around") == [
        {"index": [3, 4, 5, 6], "time": [0.3, 0.4, 0.5, 0.6], "pixels": [3, 4, 5, 6], "anchor": 5},
        {"index": [13, 14, 15, 16], "time": [1.3, 1.4, 1.5, 1.6], "pixels": [13, 14, 15, 16], "anchor": 15}]
    assert proposals("inherited") == [
        {"index": [2, 4, 6], "time": [0.2, 0.4, 0.6], "pixels": [2, 4, 6], "anchor": 6},
        {"index": [8, 10, 12], "time": [0.8, 1.0, 1.2], "pixels": [8, 10, 12], "anchor": 12}]
    assert proposals("cleared") == [{"index": [19], "time": [1.9], "pixels": [19], "anchor": 19}]
    # The file now passes: a run hands the adapter the same frames seed did.
    assert run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "1", *extra)[0] == 0
