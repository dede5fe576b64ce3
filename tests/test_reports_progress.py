"""Progress while a run goes: the live line on a terminal, heartbeats and streamed failures in logs."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evalkit import ROOT, make_eval

from glasskit_eval.cli import main
from glasskit_eval.reports import progress
from glasskit_eval.reports.progress import (
    CaseProgress,
    ProgressDisplay,
    clock,
    heartbeat_line,
    live_line,
)
from glasskit_eval.results import SampleResult, Status

CASE = """
video: cfr_h264.mp4
targets:
  lights:
    samples:
    - at: [0, 0.5, 1.0]
      expect: true
"""

#: Fails sample 0; the last sample waits until the test has seen what it expects, so the
#: test proves that output appeared before the run ended, without timing anything.
GATED_ADAPTER = """
import os, time

GO = {go!r}

def create_evaluator(config):
    return E()

class E:
    def evaluate(self, sample, target):
        if sample.sample_index == 0:
            return False
        if sample.sample_index == 2:
            deadline = time.monotonic() + 60
            while not os.path.exists(GO) and time.monotonic() < deadline:
                time.sleep(0.02)
        return True
"""


def result(status: Status, target: str = "lights") -> SampleResult:
    return SampleResult(case="walk", target=target, target_label=None, sample_index=0, timestamp_s=0.0,
                        source="at", status=status, expected=True, field=None, compare_mode=None, reason="r")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


# --- text ------------------------------------------------------------------------------


def test_clock_formats_minutes_and_hours() -> None:
    assert clock(0) == "0:00"
    assert clock(14.9) == "0:14"
    assert clock(601) == "10:01"
    assert clock(3725) == "1:02:05"
    assert clock(40, wide=True) == "00:40"


def test_live_line_names_case_target_counts_and_time_left() -> None:
    p = CaseProgress("walk", number=2, cases=5, total=442, trial=1, trials=1, started=0.0)
    assert live_line(p, 1.0, 1.0) == "case 2/5 walk · 0/442 samples · 0 failed · 0 errors · 0:01 elapsed"
    for _ in range(184):
        p.add(result(Status.PASSED))
    for _ in range(3):
        p.add(result(Status.FAILED))
    assert live_line(p, 14.0, 14.0) == ("case 2/5 walk · target lights · 187/442 samples · 3 failed · "
                                        "0 errors · 0:14 elapsed · ~0:19 left")
    p.trials, p.trial = 3, 2
    assert live_line(p, 14.0, 14.0, " | ").startswith("trial 2/3 | case 2/5 walk | ")


def test_heartbeat_line_mentions_errors_only_when_there_are_some() -> None:
    p = CaseProgress("walk", number=1, cases=1, total=442, trial=1, trials=1, started=0.0, done=187, failed=3)
    assert heartbeat_line(p, 40) == "[00:40] walk: 187/442 samples, 3 failed"
    p.errors = 1
    assert heartbeat_line(p, 40) == "[00:40] walk: 187/442 samples, 3 failed, 1 error"


def test_a_stream_case_counts_frames_fed_and_its_eta_covers_them() -> None:
    p = CaseProgress("room", number=1, cases=1, total=0, trial=1, trials=1, started=0.0, streams=1)
    assert live_line(p, 0.5, 0.5) == "case 1/1 room · streams next · 0:00 elapsed"
    p.fed(0, 750, now=1.0)
    assert live_line(p, 1.0, 1.0) == "case 1/1 room · 0/750 stream frames · 0:01 elapsed"
    p.fed(250, 750, now=1.0)
    # 250 frames in 8 s: the 500 left take 16 s more.
    assert live_line(p, 9.0, 9.0) == "case 1/1 room · 250/750 stream frames · 0:09 elapsed · ~0:16 left"
    assert heartbeat_line(p, 40) == "[00:40] room: 250/750 stream frames"


def test_while_samples_run_the_eta_says_streams_come_after() -> None:
    p = CaseProgress("room", number=1, cases=1, total=4, trial=1, trials=1, started=0.0, streams=2)
    p.add(result(Status.PASSED))
    assert live_line(p, 1.0, 1.0) == ("case 1/1 room · target lights · 1/4 samples · 0 failed · 0 errors · "
                                      "streams next · 0:01 elapsed · ~0:03 left + streams")
    for _ in range(3):
        p.add(result(Status.PASSED))
    p.fed(10, 100, now=4.0)
    assert live_line(p, 5.0, 5.0) == ("case 1/1 room · 4/4 samples · 0 failed · 0 errors · "
                                      "10/100 stream frames · 0:05 elapsed · ~0:09 left")
    assert heartbeat_line(p, 5) == "[00:05] room: 4/4 samples, 0 failed, 10/100 stream frames"


def test_a_narrow_terminal_keeps_the_counts_and_the_time_left() -> None:
    p = CaseProgress("room", number=1, cases=1, total=24, trial=1, trials=1, started=0.0, streams=1, done=24,
                     failed=6, target="lit")
    p.fed(375, 750, now=10.0)
    line = live_line(p, 20.0, 20.0, width=79)
    assert line == "case 1/1 room · 375/750 stream frames · 0:20 elapsed · ~0:10 left"
    assert live_line(p, 20.0, 20.0, width=200).count(" · ") == 6


def test_fed_frames_count_as_progress_for_heartbeats() -> None:
    now = Clock()
    out = io.StringIO()
    display = ProgressDisplay(out, io.StringIO(), live=False, now=now)
    display.case_started("room", 1, 1, 0, 1, 1, streams=1)
    display.stream_fed(0, 750)
    now.t += 10
    display.stream_fed(300, 750)
    assert out.getvalue().splitlines() == ["[00:10] room: 300/750 stream frames"]


# --- when to write -----------------------------------------------------------------------


def test_heartbeats_at_most_every_10s_with_progress_and_at_least_every_30s() -> None:
    now = Clock()
    out = io.StringIO()
    display = ProgressDisplay(out, io.StringIO(), live=False, now=now)
    display.case_started("walk", 1, 1, 10, 1, 1)
    display.result(result(Status.PASSED))
    now.t += 9.9
    display.tick()
    assert out.getvalue() == ""  # too soon
    now.t += 0.1
    display.tick()
    assert out.getvalue().splitlines() == ["[00:10] walk: 1/10 samples, 0 failed"]
    now.t += 29.9
    display.tick()  # nothing finished since the last beat, and it is not yet 30 s
    assert len(out.getvalue().splitlines()) == 1
    now.t += 0.1
    display.tick()
    assert out.getvalue().splitlines()[-1] == "[00:40] walk: 1/10 samples, 0 failed"
    display.case_finished()
    now.t += 100
    display.tick()
    assert len(out.getvalue().splitlines()) == 2  # no heartbeat between cases


def test_live_line_is_throttled_and_cleared_around_other_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "_columns", lambda stream: 200)
    now = Clock()
    out, err = io.StringIO(), io.StringIO()
    display = ProgressDisplay(out, err, live=True, now=now)
    display.case_started("walk", 1, 1, 3, 1, 1)
    drawn = err.getvalue()
    assert drawn == "\r\033[Kcase 1/1 walk | 0/3 samples | 0 failed | 0 errors | 0:00 elapsed"
    display.result(result(Status.PASSED))
    assert err.getvalue() == drawn  # within 0.1 s of the last redraw
    now.t += 0.25
    display.tick()
    assert err.getvalue().endswith("1/3 samples | 0 failed | 0 errors | 0:00 elapsed | ~0:00 left")
    before = len(err.getvalue())
    display.write_above("    FAILED walk/lights")
    assert out.getvalue() == "    FAILED walk/lights\n"
    # Cleared first; drawn again below the printed line by the next tick, not sooner.
    assert err.getvalue()[before:] == "\r\033[K"
    display.tick()
    assert err.getvalue()[before:] == "\r\033[K"
    now.t += 0.25
    display.tick()
    assert err.getvalue()[before:].startswith("\r\033[K\r\033[Kcase 1/1")
    before = len(err.getvalue())
    now.t += 0.25
    display.write_above("    FAILED again")  # the line was drawn long enough ago: back at once
    assert err.getvalue()[before:].startswith("\r\033[K\r\033[Kcase 1/1")
    monkeypatch.setattr(progress, "_columns", lambda stream: 20)
    now.t += 0.25
    display.tick()
    # Never wider than the terminal; the time left outranks the target's name.
    assert err.getvalue().endswith("\r\033[Kcase 1/1 walk | ~0:")
    display.case_finished()
    assert err.getvalue().endswith("\r\033[K")
    display.write_above("after")
    assert err.getvalue().endswith("\r\033[K")  # nothing drawn outside a case


# --- end to end ----------------------------------------------------------------------------


def _read_until(fd: int, wanted: bytes, proc: subprocess.Popen[bytes], seen: bytearray) -> None:
    deadline = time.monotonic() + 60
    while wanted not in seen:
        assert time.monotonic() < deadline, f"never saw {wanted!r} in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the pty's other side closed
                chunk = b""
            if not chunk:
                assert wanted in seen, f"the run ended before {wanted!r} appeared: {bytes(seen)!r}"
            seen.extend(chunk)
        elif proc.poll() is not None:
            assert wanted in seen, f"the run ended before {wanted!r} appeared: {bytes(seen)!r}"


def _drain(fd: int, proc: subprocess.Popen[bytes], seen: bytearray) -> None:
    while True:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen.extend(chunk)
        elif proc.poll() is not None:
            break


def _env() -> dict[str, str]:
    env = dict(os.environ, TERM="xterm", PYTHONIOENCODING="utf-8")
    env["NO_COLOR"] = "1"
    return env


def test_terminal_run_shows_a_live_line_that_is_gone_at_the_end(tmp_path: Path) -> None:
    import fcntl
    import pty
    import struct
    import termios

    go = tmp_path / "go"
    eval_dir = make_eval(tmp_path, {"walk": CASE}, GATED_ADAPTER.format(go=str(go)))
    master, slave = pty.openpty()
    # A wide terminal, so the live line is never cut short.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir)],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=_env())
    os.close(slave)
    seen = bytearray()
    try:
        # The failure of sample 0 is printed, and the live line counts 2 of 3, while sample 2 waits.
        _read_until(master, b"FAILED walk/lights @0s frame=0", proc, seen)
        _read_until(master, "2/3 samples · 1 failed · 0 errors".encode(), proc, seen)
        go.touch()
        _drain(master, proc, seen)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = seen.decode()
    assert "\r\033[Kcase 1/1 walk · target lights · 2/3 samples · 1 failed · 0 errors · 0:0" in text
    assert " elapsed · ~0:0" in text  # a wide terminal gets the whole line
    # The last live line is cleared before the case's summary, and nothing redraws it after.
    tail = text[text.rindex("\r\033[K"):]
    assert "target lights: 3 samples" in tail
    assert "samples ·" not in tail
    assert "Pass rate: 66.7%" in text


def test_piped_run_prints_each_failure_as_it_is_judged(tmp_path: Path) -> None:
    go = tmp_path / "go"
    eval_dir = make_eval(tmp_path, {"walk": CASE}, GATED_ADAPTER.format(go=str(go)))
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir)],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    seen = bytearray()
    try:
        _read_until(proc.stdout.fileno(), b"reason=", proc, seen)
        go.touch()
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    seen.extend(rest)
    text = seen.decode()
    line = next(x for x in text.splitlines() if "FAILED" in x and "reason=" in x)
    assert line == "    FAILED walk/lights @0s frame=0 expected=true observed=false reason=expected true, observed false"
    # No redraws in a log; stderr holds only the checkpoint's path, said when it is created.
    assert "\r" not in text and "\033[" not in text
    assert [line.split(": ")[0] for line in err.decode().splitlines()] == ["Checkpoint"]


def test_piped_run_prints_heartbeats_while_a_case_runs(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # In-process, with the intervals shortened; the adapter holds its last call until the
    # log shows a heartbeat, so the heartbeat came while the case was still running.
    monkeypatch.setattr(progress, "HEARTBEAT_MIN_S", 0.05)
    monkeypatch.setattr(progress, "HEARTBEAT_MAX_S", 0.2)
    log = tmp_path / "log.txt"
    adapter = f"""
import time
from pathlib import Path
LOG = Path({str(log)!r})

def create_evaluator(config):
    return E()

class E:
    def evaluate(self, sample, target):
        if sample.sample_index == 2:
            deadline = time.monotonic() + 60
            while "walk: 2/3 samples, 0 failed" not in LOG.read_text() and time.monotonic() < deadline:
                time.sleep(0.02)
        return True
"""
    eval_dir = make_eval(tmp_path, {"walk": CASE}, adapter)
    err = io.StringIO()
    with log.open("w") as out:
        code = main(["run", "--eval-dir", str(eval_dir)], out=out, err=err)
    text = log.read_text()
    assert code == 0, err.getvalue()
    beats = [x for x in text.splitlines() if x.startswith("[") and "walk: 2/3 samples, 0 failed" in x]
    assert beats
    assert text.index(beats[0]) < text.index("target lights: 3 samples")
