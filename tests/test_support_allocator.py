"""The allocator tuning: freed frame-sized blocks serve the next ones instead of new pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from glasskit_eval.support import allocator

ROOT = Path(__file__).resolve().parent.parent
glibc_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc tuning is Linux-only")

# Page faults while frame-sized buffers of a few sizes are made and freed on worker threads
# (as decoders, converters and PNG encoders do), before and after the tuning.
CHURN = """
import resource, threading
from glasskit_eval.support.allocator import reuse_freed_frames

def work():
    for _ in range(50):
        rgb = bytearray(3 << 20)
        image = bytearray(4 << 20)
        del rgb
        png = bytearray(6 << 20)
        del image, png

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(2):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

default = faults()
applied = reuse_freed_frames()
print(default, faults(), applied)
"""


def churn(env: dict[str, str] | None = None) -> tuple[int, int, str]:
    import os

    proc = subprocess.run([sys.executable, "-c", CHURN], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, check=True)
    default, tuned, applied = proc.stdout.split()
    return int(default), int(tuned), applied


@glibc_only
def test_freed_frames_are_reused_instead_of_faulted_in_again() -> None:
    default, tuned, applied = churn()
    assert applied == "True"
    # 1.3 GiB made in all, ~330,000 pages: the defaults fault nearly all of them in again.
    assert default > 150_000
    assert tuned < default / 20


@glibc_only
def test_the_users_own_malloc_tuning_wins() -> None:
    _default, _tuned, applied = churn({"MALLOC_TRIM_THRESHOLD_": "131072"})
    assert applied == "False"


def test_it_is_applied_once_and_only_by_the_commands_that_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval import cli

    calls: list[int] = []

    def apply() -> bool:
        calls.append(1)
        return True

    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setattr(allocator, "_apply", apply)
    assert allocator.reuse_freed_frames() and allocator.reuse_freed_frames()
    assert calls == [1]
    assert cli.DECODING_COMMANDS == {"run", "seed", "export-frames", "review"}
    assert cli.DECODING_COMMANDS <= set(cli.COMMAND_NAMES)
