"""End to end through ``main([...])``: command adapters give the same results as Python ones.

The same echo adapter runs in-process (``--adapter``), served by protocol_server, and
as its Node twin built on the JavaScript helper; the reports must agree result for
result, including the SHA-256 of every frame's pixels, so the exact frames made it
through the bridge. Misbehaving adapters must end runs with a clear error, quickly.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, make_eval, read_json, run_cli

pytestmark = pytest.mark.e2e

ADAPTERS = ROOT / "fixtures" / "adapters"
PY_ECHO = f"{ADAPTERS / 'python' / 'echo_adapter.py'}:create_evaluator"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

CASE = """
video: cfr_h264.mp4
targets:
  size:
    label: Frame size
    config: {detail: high}
    samples:
    - range: [0.0, 1.0]
      every_s: 0.125
      field: width
      expect: 128
    - at: 1.05
      field: height
      expect: 99
  frames:
    samples:
    - at: [0.3, 0.7, 1.5]
      field: frameIndex
      expect: 3
    - at: 0.5
      field: firstPixel
      expect: [255, 0, 0]
      compare: {mode: json_subset}
      ignore: not calibrated
"""


def protocol_server(target: str) -> str:
    return shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server", target])


def node(script: str, *flags: str) -> str:
    return shlex.join(["node", str(ADAPTERS / "js" / script), *flags])


def misbehave(mode: str) -> str:
    return shlex.join([sys.executable, str(ADAPTERS / "python" / "misbehave.py"), mode])


def comparable(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every result, without timings (which legitimately differ between runs)."""
    return [
        {key: value for key, value in result.items() if "duration" not in key}
        for trial in report["trials"]
        for result in trial["results"]
    ]


@pytest.fixture(autouse=True)
def importable_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m glasskit_eval.protocol_server`` must work from any directory."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


@pytest.fixture
def eval_dir(tmp_path: Path) -> Path:
    return make_eval(tmp_path, {"clip": CASE})


def run_report(eval_dir: Path, name: str, *adapter: str, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    report = eval_dir.parent / f"{name}.json"
    code, _out, err = run_cli(
        "run", "--eval-dir", eval_dir, *adapter, "--concurrency", "3",
        "--artifacts-dir", eval_dir.parent / "artifacts", "--output-json", report, *extra,
    )
    assert report.exists(), err
    return code, read_json(report)


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(protocol_server(PY_ECHO), id="python-protocol-server"),
        pytest.param(node("echo_adapter.mjs"), id="node-helper", marks=needs_node),
    ],
)
def test_evaluate_gives_the_same_results_as_the_python_adapter(eval_dir: Path, command: str) -> None:
    expected_code, expected = run_report(eval_dir, "python", "--adapter", PY_ECHO)
    code, report = run_report(eval_dir, "command", "--adapter-command", command)
    assert code == expected_code
    results = comparable(report)
    assert results == comparable(expected)
    # The run did what the case says, so the comparison above is not vacuous.
    statuses = [r["status"] for r in results]
    assert statuses.count("passed") == 9 and statuses.count("failed") == 3
    assert statuses.count("ignored") == 1
    observed = [r["observed"] for r in results if r["observed"]]
    assert len({o["pixelsSha256"] for o in observed}) > 5
    first = observed[0]
    assert first["strategy"] == "evaluate"
    assert first["context"]["config"] == {}
    assert first["target"] == {"id": "size", "index": 0, "label": "Frame size", "config": {"detail": "high"}}
    assert report["summary"] == {**report["summary"], "evaluated_samples": 12}


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(protocol_server(PY_ECHO), id="python-protocol-server"),
        pytest.param(node("echo_adapter.mjs", "--many"), id="node-helper", marks=needs_node),
        pytest.param(node("echo_adapter.mjs", "--both"), id="node-helper-both", marks=needs_node),
    ],
)
def test_evaluate_many_gives_the_same_results_as_the_python_adapter(eval_dir: Path, command: str) -> None:
    config = eval_dir / "adapter.yaml"
    config.write_text("many: true\n")
    expected_code, expected = run_report(eval_dir, "python", "--adapter", PY_ECHO)
    code, report = run_report(eval_dir, "command", "--adapter-command", command)
    assert code == expected_code
    results = comparable(report)
    assert results == comparable(expected)
    assert {r["evaluation_timing_mode"] for r in results if r["status"] != "ignored"} == {"batch_amortized"}
    assert {r["observed"]["strategy"] for r in results if r["observed"]} == {"evaluateMany"}


def test_demo_eval_served_by_protocol_server_matches_in_process(tmp_path: Path) -> None:
    demo = tmp_path / "eval"
    shutil.copytree(ROOT / "fixtures" / "demo" / "eval", demo, ignore=shutil.ignore_patterns("runs"))
    reports = []
    for name, adapter in (
        ("python", ("--adapter", f"{demo / 'adapter.py'}:create_evaluator")),
        ("command", ("--adapter-command", protocol_server(f"{demo / 'adapter.py'}:create_evaluator"))),
    ):
        report = tmp_path / f"{name}.json"
        code, out, err = run_cli("run", "--eval-dir", demo, *adapter, "--output-json", report)
        assert code == 0, err
        assert "Pass rate: 100.0%" in out
        reports.append(comparable(read_json(report)))
    assert reports[0] == reports[1]


def test_repeated_trials_start_a_fresh_process_each(eval_dir: Path) -> None:
    report_path = eval_dir.parent / "repeat.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", protocol_server(PY_ECHO),
                              "--repeat", "3", "--output-json", report_path)
    report = read_json(report_path)
    assert len(report["trials"]) == 3
    # The adapter's stderr is mirrored: one start and one close per trial.
    assert err.count("echo adapter ready") == 3
    assert err.count("echo adapter closed") == 3


def test_validate_constructs_and_closes_the_adapter(eval_dir: Path) -> None:
    code, _out, err = run_cli("validate", "--eval-dir", eval_dir, "--adapter-command", protocol_server(PY_ECHO))
    assert code == 0, err
    code, out, err = run_cli("validate", "--eval-dir", eval_dir, "--adapter-command", misbehave("protocol-v2"))
    assert code != 0
    assert "protocol version 2" in out + err


# -- failures end to end ------------------------------------------------------------------

FAILING_CASE = """
video: cfr_h264.mp4
targets:
  slow:
    config: {hang: true}
    samples:
    - at: [0.0, 0.1]
      expect: true
  broken:
    config: {fail: backend exploded}
    samples:
    - at: 0.2
      expect: true
"""


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(protocol_server(PY_ECHO), id="python-protocol-server"),
        pytest.param(node("echo_adapter.mjs"), id="node-helper", marks=needs_node),
    ],
)
def test_fail_fast_error_cancels_hanging_calls_and_closes(tmp_path: Path, command: str) -> None:
    eval_dir = make_eval(tmp_path, {"clip": FAILING_CASE})
    # Time order interleaves the targets, so broken's call fails while slow's two hang (in
    # declaration order slow's calls would have to finish before broken starts).
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", command, "--concurrency", "4",
                              "--order", "time")
    assert code == 2
    assert "backend exploded" in err
    mirrored = err  # adapter stderr is mirrored into the command's error stream
    # Both hanging calls were told to stop, and the adapter then closed normally.
    assert mirrored.count("cancelled sample") + mirrored.count("aborted sample") == 2
    assert "echo adapter closed" in mirrored


def test_keep_going_records_adapter_errors(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": FAILING_CASE.replace("hang: true", "k: 1")})
    report = tmp_path / "report.json"
    code, _out, err = run_cli(
        "run", "--eval-dir", eval_dir, "--adapter-command", protocol_server(PY_ECHO),
        "--keep-going", "--output-json", report,
    )
    assert code == 1, err
    [broken] = [r for r in comparable(read_json(report)) if r["target"] == "broken"]
    assert broken["status"] == "error"
    assert "ValueError: backend exploded" in broken["reason"]


def test_adapter_crash_mid_run_names_pid_status_and_stderr(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE})
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", misbehave("crash"))
    assert code == 2
    assert "exited with status 7" in err and "pid" in err
    assert "model server connection refused" in err


def test_a_helper_left_holding_the_adapters_output_fails_the_run_by_name_and_is_ended(tmp_path: Path) -> None:
    import re

    eval_dir = make_eval(tmp_path, {"clip": CASE})
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", misbehave("leave-helper"),
                              "--output-json", report)
    assert code == 2, err
    helper = re.search(r"helper pid (\d+)", err)
    assert helper, err
    assert (f"did not close cleanly: it exited but left 1 process holding its stdout or stderr: "
            f"pid {helper.group(1)} (sleep 600); they were terminated") in err
    assert "Traceback" not in err and not report.exists()
    assert not Path(f"/proc/{helper.group(1)}").exists() or \
        Path(f"/proc/{helper.group(1)}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")


def test_stdout_pollution_tells_the_user_to_log_to_stderr(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE})
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", misbehave("stdout-log"))
    assert code == 2
    assert "Loading model weights" in err and "write logs to stderr" in err


def test_command_that_does_not_exist(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"clip": CASE})
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", "no-such-adapter-xyz")
    assert code == 2
    assert "'no-such-adapter-xyz' was not found" in err


@pytest.mark.parametrize("mode", ["crash-after", "many-crash-after"])
def test_keep_going_stops_when_the_adapter_process_exits_and_resume_finishes(tmp_path: Path, mode: str) -> None:
    # An exited process is not "an individual call failure": upstream stops the run (exit 2),
    # keeps the checkpoint and prints the resume command rather than failing every sample after it.
    case = ("video: cfr_h264.mp4\ntargets:\n  a:\n    samples:\n    - at: [0.1, 0.2, 0.3]\n      expect: true\n"
            "  b:\n    samples:\n    - at: [0.4, 0.5, 0.6]\n      expect: true\n")
    eval_dir = make_eval(tmp_path, {"clip": case})
    report = tmp_path / "report.json"
    answered = "3" if mode == "crash-after" else "1"  # three calls, or target a's batch
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", misbehave(mode) + " " + answered,
                             "--keep-going", "--concurrency", "1", "--output-json", report)
    assert code == 2, out + err
    assert "exited with status 7" in err
    # Quoted in the one error (and mirrored once as the adapter wrote it), not once per sample.
    assert err.count("model server connection refused") == 2, err
    assert not report.exists()
    checkpoint = err.split("run --resume ", 1)[1].split("`")[0]
    records = (Path(checkpoint) / "records.jsonl").read_text()
    assert records.count('"status": "passed"') + records.count('"status":"passed"') == 3
    assert '"error"' not in records.replace('"error_kind"', "")
    code, out, err = run_cli("run", "--resume", checkpoint)
    assert code == 0, out + err
    results = read_json(report)["trials"][0]["results"]
    assert [r["status"] for r in results] == ["passed"] * 6


def test_second_sigint_exits_130_at_once_and_kills_the_adapter_group(tmp_path: Path) -> None:
    import re
    import signal
    import subprocess
    import time

    eval_dir = make_eval(tmp_path, {"clip": CASE})
    command = shlex.join([sys.executable, str(ADAPTERS / "python" / "misbehave.py"), "ignore-term", "hang"])
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir),
                             "--adapter-command", command], cwd=ROOT, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen: list[str] = []

    def wait_for(text: str) -> None:
        while not any(text in line for line in seen):
            line = proc.stderr.readline()  # type: ignore[union-attr]
            assert line, "".join(seen)
            seen.append(line)

    try:
        wait_for("ignoring request")  # a call is pending in an adapter that ignores close and SIGTERM
        proc.send_signal(signal.SIGINT)
        wait_for("SIGINT received: stopping")
        proc.send_signal(signal.SIGINT)
        err = "".join(seen) + proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "SIGINT received again: exiting now" in err
    child = int(re.search(r"child pid (\d+)", err).group(1))  # type: ignore[union-attr]

    def gone() -> bool:
        try:
            state = Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return True
        return state in ("Z", "X")  # an orphan's zombie, where PID 1 does not reap, is dead

    deadline = time.monotonic() + 5
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone()
