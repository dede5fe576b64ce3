"""--adapter-exec: one real process per sample; happy path, crash, garbage and timeout."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from evalkit import ROOT, make_eval, read_json, run_cli

from glasskit_eval.adapters._procio import live_group_members

CASE = """
video: cfr_h264.mp4
targets:
  t:
    samples:
    - at: [0.0, 0.5]
      field: width
      expect: 128
"""

SCRIPT = r"""
import base64, json, os, subprocess, sys, time
request = json.load(sys.stdin)
sample = request["sample"]
mode = sys.argv[1]
state = sys.argv[2]
with open(os.path.join(state, f"pid-{sample['sampleIndex']}"), "w") as f:
    f.write(str(os.getpid()))
if mode == "crash":
    print("model exploded: out of memory", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("not json at all")
    sys.exit(0)
if mode == "setsid":
    # A daemonizing helper: its own session, no pipe of ours held, the observation still written.
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(state, f"daemon-{sample['sampleIndex']}"), "w") as f:
        f.write(str(daemon.pid))
if mode == "setsid_holds":
    # A helper in its own session that inherits stdout and stderr and outlives the process by 30 s
    # (so that a regression fails the test rather than hanging it).
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True,
                              stdin=subprocess.DEVNULL)
    with open(os.path.join(state, f"daemon-{sample['sampleIndex']}"), "w") as f:
        f.write(str(daemon.pid))
if mode == "bigout":
    sys.stdout.write('"')
    block = "x" * (1 << 20)
    for _ in range(65):
        sys.stdout.write(block)
    sys.stdout.write('"')
    sys.exit(0)
if mode == "bigerr":
    line = "e" * 9999 + "\n"
    for _ in range(12000):
        sys.stderr.write(line)
    print("the last words", file=sys.stderr)
    sys.exit(1)
if mode == "hang":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.path.join(state, f"child-{sample['sampleIndex']}"), "w") as f:
        f.write(str(child.pid))
    time.sleep(3600)
image = sample["image"]
with open(image["path"], "rb") as f:
    same = f.read() == base64.b64decode(image["dataBase64"])
json.dump({"width": image["width"], "same_png": same, "frame": sample["frameIndex"],
           "target": request["target"]["id"]}, sys.stdout)
"""


def run_exec(tmp_path: Path, mode: str, *argv: str) -> tuple[int, str, dict[str, Any], Path]:
    eval_dir = make_eval(tmp_path, {"case": CASE})
    script = tmp_path / "judge.py"
    script.write_text(SCRIPT)
    state = tmp_path / "state"
    state.mkdir()
    report = tmp_path / "r.json"
    command = shlex.join([sys.executable, str(script), mode, str(state)])
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-exec", command, "--output-json", report,
                              *argv)
    return code, err, read_json(report) if report.exists() else {}, state


def test_happy_path_sends_path_and_base64(tmp_path: Path) -> None:
    code, err, report, state = run_exec(tmp_path, "ok", "--concurrency", "2")
    assert code == 0, err
    observed = [r["observed"] for r in report["trials"][0]["results"]]
    assert observed == [{"width": 128, "same_png": True, "frame": 0, "target": "t"},
                        {"width": 128, "same_png": True, "frame": 5, "target": "t"}]
    assert len({(state / f"pid-{i}").read_text() for i in (0, 1)}) == 2  # one process per sample
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("glasskit-frame-*.png"))


def test_crash_quotes_the_stderr_tail(tmp_path: Path) -> None:
    code, err, _report, _state = run_exec(tmp_path, "crash")
    assert code == 2
    assert "exited with status 3" in err and "model exploded: out of memory" in err


def test_garbage_stdout_is_an_adapter_error(tmp_path: Path) -> None:
    code, _err, report, _state = run_exec(tmp_path, "garbage", "--keep-going")
    assert code == 1
    reason = report["trials"][0]["results"][0]["reason"]
    assert "'not json at all'" in reason and "not JSON" in reason


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    code, _err, report, state = run_exec(tmp_path, "hang", "--timeout", "2", "--concurrency", "2", "--keep-going")
    assert code == 1
    assert [r["error_kind"] for r in report["trials"][0]["results"]] == ["timeout", "timeout"]
    for index in (0, 1):
        pid = int((state / f"pid-{index}").read_text())
        # The group holds the process and the child it started; neither is alive (zombies aside).
        assert (state / f"child-{index}").exists()
        assert not live_group_members(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def test_a_process_that_calls_setsid_is_gone_after_its_sample(tmp_path: Path) -> None:
    import signal
    import time

    try:
        code, err, report, state = run_exec(tmp_path, "setsid")
        assert code == 0, err
        daemons = [int((state / f"daemon-{i}").read_text()) for i in (0, 1)]
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in daemons) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in daemons)
    finally:
        for path in (tmp_path / "state").glob("daemon-*"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(path.read_text()), signal.SIGKILL)


def test_a_setsid_helper_holding_stdout_does_not_stretch_the_call(tmp_path: Path) -> None:
    import signal
    import time

    try:
        started = time.monotonic()
        code, err, report, state = run_exec(tmp_path, "setsid_holds")
        # Each call ends when its process exits (plus a grace of a quarter second), not with the helper.
        assert time.monotonic() - started < 20
        assert code == 0, err
        assert [r["observed"]["frame"] for r in report["trials"][0]["results"]] == [0, 5]
        daemons = [int((state / f"daemon-{i}").read_text()) for i in (0, 1)]
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in daemons) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in daemons)
    finally:
        for path in (tmp_path / "state").glob("daemon-*"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(path.read_text()), signal.SIGKILL)


def test_stdout_over_64_mib_is_an_adapter_error(tmp_path: Path) -> None:
    code, err, report, _state = run_exec(tmp_path, "bigout", "--keep-going")
    assert code == 1, err
    for result in report["trials"][0]["results"]:
        assert result["error_kind"] == "adapter" and "wrote more than 64 MiB to stdout" in result["reason"]
    assert (tmp_path / "r.json").stat().st_size < 1 << 20


def test_only_the_tail_of_a_flood_of_stderr_is_kept(tmp_path: Path) -> None:
    # 120 MB of stderr per sample: the whole of it held as text would raise the peak by far more.
    eval_dir = make_eval(tmp_path, {"case": CASE})
    script = tmp_path / "judge.py"
    script.write_text(SCRIPT)
    (tmp_path / "state").mkdir()
    peaks = {}
    for mode in ("crash", "bigerr"):
        command = shlex.join([sys.executable, str(script), mode, str(tmp_path / "state")])
        argv = [sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir), "--adapter-exec",
                command, "--keep-going", "--output-json", str(tmp_path / f"{mode}.json")]
        probe = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True); "
                 "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                              cwd=ROOT, timeout=300, check=True)
        code, peak_kib = (int(word) for word in done.stdout.split())
        assert code == 1, done
        peaks[mode] = peak_kib
    assert peaks["bigerr"] < peaks["crash"] + 40 * 1024, peaks
    reason = read_json(tmp_path / "bigerr.json")["trials"][0]["results"][0]["reason"]
    assert "Last lines of its stderr" in reason and len(reason) < 20_000
