"""The end of a run says what happened and where it went, in a pipe and on an 80-column terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from cikit import ci_eval
from evalkit import ROOT, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    return ci_eval(tmp_path, {"door/size/0": "raise"})


def test_the_last_lines_are_what_was_written_and_the_verdict(eval_dir: Path) -> None:
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", "r.json",
                             "--junit-xml", "out/j.xml", "--html", "r.html")
    assert code == 1
    lines = out.rstrip("\n").splitlines()
    assert lines[-4:] == ["Wrote r.json", "Wrote out/j.xml", "Wrote r.html",
                          "FAILED: 2 failed, 1 errors, 6 passed, 1 ignored in " + lines[-1].split(" in ")[1]]
    assert lines[-1].endswith("s; gates: adapter_errors")
    # After every hint: the resume command comes before them, and the checkpoint is named once.
    assert out.index("Resume with `") < out.index("Wrote r.json")
    assert (out + err).count("Checkpoint: ") == 1
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--case", "lamp")
    assert code == 0 and out.rstrip("\n").splitlines()[-1].startswith("PASSED: 4 passed in ")


def test_a_failure_without_a_gate_says_so_in_the_verdict(eval_dir: Path) -> None:
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--case", "door", "--target", "idx")
    assert code == 0
    assert out.rstrip("\n").splitlines()[-1].endswith("; no gate is set")
    # Failures that fail nothing are not a pass: the line does not start with PASSED (the exit code is 0).
    assert out.rstrip("\n").splitlines()[-1].startswith("NOT GATED: 2 failed, 2 passed, 1 ignored in ")


def test_an_error_line_does_not_repeat_its_sample(eval_dir: Path) -> None:
    _code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    (line,) = [line for line in out.splitlines() if line.lstrip().startswith("ERROR ")]
    assert "door/size @0s" in line and "reason=adapter_error: RuntimeError: boom: door/size/0" in line
    assert "adapter failed for" not in line


def test_latency_shows_only_when_it_says_something(eval_dir: Path) -> None:
    _code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    assert "Latency: p50" not in out  # 9 samples: percentiles would be noise
    _code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--max-p95-latency", "10")
    assert "Latency: p50" in out


def test_github_folds_the_long_tables(eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    _code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    lines = out.splitlines()
    assert "::group::By target" in lines and "::group::Failures (3 failed or errored samples)" in lines
    assert lines.count("::group::") == 0 and lines.count("::endgroup::") == 2


def run_in_terminal(argv: list[str], cwd: Path, columns: int = 80) -> str:
    """``python -m glasskit_eval argv`` on a pseudo-terminal of ``columns``; everything it drew."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "NO_COLOR": "1"}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", *argv], cwd=cwd, stdin=child, stdout=child,
                            stderr=child, env=env, close_fds=True)
    os.close(child)
    chunks = []
    try:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # the other end is closed: the process is done
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main)
        proc.wait(timeout=60)
    return b"".join(chunks).decode("utf-8", "replace")


def test_on_an_80_column_terminal_the_tables_fit(eval_dir: Path, tmp_path: Path) -> None:
    text = run_in_terminal(["run", "--eval-dir", str(eval_dir), "--keep-going", "--output-json", "r.json"], tmp_path)
    # What stays on screen: each line as last drawn (the live line redraws itself with \r).
    screen = [line.rsplit("\r", 1)[-1] for line in text.replace("\r\n", "\n").split("\n")]
    start = screen.index("By target")
    end = next(i for i, line in enumerate(screen) if line.startswith("Look at the first: "))
    tables = screen[start:end]
    assert len(tables) > 8 and all(len(line) <= 80 for line in tables), [line for line in tables if len(line) > 80]
    lines = [line for line in screen if line.strip()]
    assert lines[-2] == "Wrote r.json" and lines[-1].startswith("FAILED: 2 failed, 1 errors, 6 passed")
