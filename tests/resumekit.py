"""Runs stopped and resumed: a real ``python -m glasskit_eval`` signalled (SIGKILL unless told) at a
moment the test chooses, what its checkpoint keeps for a resume, and reports compared with an
uninterrupted run's, timings aside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from glasskit_eval.checkpoints.store import MANIFEST_NAME, RECORDS_NAME, decode_records

ROOT = Path(__file__).resolve().parent.parent

#: Adapter source defining ``log(line)``: one line appended to ``calls.log`` beside the adapter and
#: fsynced, so a SIGKILL loses no call the adapter made. Prepend it to an adapter's own source.
FSYNCED_LOG = """
import os

HERE = os.path.dirname(os.path.abspath(__file__))

def log(line):
    fd = os.open(os.path.join(HERE, "calls.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
"""

#: Report keys that differ between any two runs of the same eval.
VOLATILE = frozenset({
    "duration_seconds", "evaluation_duration_seconds", "average_evaluation_seconds_per_attempt",
    "average_evaluation_seconds_per_sample", "throughput_attempts_per_second", "throughput_samples_per_second",
    "eval_dir", "path", "resumed", "latency", "batch_call_latency", "call_duration_seconds"})


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["NO_COLOR"] = "1"
    return env


def run_command(eval_dir: Path, report: Path, checkpoint: Path | None, args: Sequence[str]) -> list[str]:
    """``run`` of the eval with ``args``, or the resume of ``checkpoint`` when there is one."""
    base = [sys.executable, "-m", "glasskit_eval", "run"]
    if checkpoint is not None:
        return [*base, "--resume", str(checkpoint)]
    return [*base, "--eval-dir", str(eval_dir), "--output-json", str(report), *args]


def run_until_signalled(argv: Sequence[str], ready: Callable[[], bool], *, signum: int = signal.SIGKILL,
                        delay: float = 0.0, cwd: Path | None = None, env: dict[str, str] | None = None,
                        poll: float = 0.001, timeout: float = 60) -> tuple[int, str, str]:
    """Start ``argv``; once ``ready()`` (or ``timeout`` seconds, or its own exit), wait ``delay`` and
    send ``signum`` if it still runs. Returns (exit code, stdout, stderr); nothing is left running."""
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline and not ready():
            time.sleep(poll)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def run_to_the_end(argv: Sequence[str], timeout: float = 120) -> None:
    """Run ``argv`` to its end; it must exit 0 or 1 (the gates' verdict)."""
    proc = subprocess.run(list(argv), env=environment(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr


def log_lines(eval_dir: Path) -> list[str]:
    """The adapter's fsynced ``calls.log``, one line a call."""
    path = eval_dir / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def find_checkpoint(eval_dir: Path) -> Path | None:
    root = eval_dir / "runs" / "checkpoints"
    found = [p for p in sorted(root.iterdir()) if (p / MANIFEST_NAME).exists()] if root.exists() else []
    assert len(found) <= 1, found
    return found[0] if found else None


def checkpoint_records(checkpoint: Path) -> list[dict[str, Any]]:
    """The checkpoint's intact records, in order."""
    return list(decode_records((checkpoint / RECORDS_NAME).read_bytes(), checkpoint).records)


def reusable(records: Sequence[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """What a resume reuses: the key of every record whose last word is not an adapter error."""
    last = {tuple(record["key"]): record["payload"] for record in records}
    return {k for k, p in last.items() if not (p["status"] == "error" and p.get("error_kind") == "adapter")}


def normalized(value: Any, volatile: frozenset[str] = VOLATILE) -> Any:
    """The report without the keys that differ between runs."""
    if isinstance(value, dict):
        return {k: normalized(v, volatile) for k, v in value.items() if k not in volatile}
    if isinstance(value, list):
        return [normalized(v, volatile) for v in value]
    return value
