"""The README's Quick start, run literally: its shell blocks, in a copy of the checkout, with the output it shows."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent


def quick_start() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("\n## Quick start\n"):text.index("\n## Concepts\n")]


def blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What the Quick start needs of a checkout: the demo eval (its runs/ left behind)."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "fixtures" / "demo", root / "fixtures" / "demo",
                    ignore=shutil.ignore_patterns("runs", "__pycache__"))
    # `python3` in the blocks is this interpreter, running this checkout's package. A wrapper that
    # execs it by its own path, not a symlink: Python finds its virtual environment (pyvenv.cfg)
    # next to the path it was started by, so a symlink elsewhere would run the base interpreter
    # without the venv's packages.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return root


def shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{cwd.parent / 'bin'}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "NO_COLOR": "1"}
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GLASSKIT_EVAL_CHECKPOINT_DIR"):
        env.pop(name, None)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def shape(text: str) -> list[str]:
    """Lines with what varies between machines (timings, the checkout's path) taken out."""
    text = re.sub(r"Eval: .*", "Eval: <path>", text)
    text = re.sub(r"\d+\.\d+(ms|s|s/s)?", "<n>", text)
    # A timing's width moves the columns of its table (9.98ms, 10.02ms): compare the cells, not the padding.
    text = re.sub(r"(?<=\S) {2,}", "  ", text)
    text = re.sub(r"-{3,}", "---", text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def loose(text: str) -> list[str]:
    """Lines with every figure taken out: an excerpt's numbers, units and Pareto marks vary with timing."""
    text = re.sub(r"[+-]?\d+(\.\d+)?(e[+-]?\d+)?\*?( ?(µs|ms|s))?", "<n>", text)
    text = re.sub(r"\byes\b", "", text)
    return [" ".join(line.split()) for line in text.strip("\n").splitlines()]


def in_order(shown: list[str], printed: list[str]) -> bool:
    """Whether every shown line was printed, in the order shown (an excerpt may skip lines)."""
    rest = iter(printed)
    return all(any(line == out for out in rest) for line in shown)


def test_in_order_and_loose() -> None:
    assert in_order(["a", "c"], ["a", "b", "c"]) and not in_order(["c", "a"], ["a", "b", "c"])
    assert loose("jpeg  100.0%  +0.0  1.2e-05*  181 µs  2 ms    yes") == ["jpeg <n>% <n> <n> <n> <n>"]


def test_the_quick_start_works_as_typed(checkout: Path) -> None:
    section = quick_start()
    demo, arms, own = blocks(section, "sh")
    shown, arms_shown = blocks(section, "text")
    done = shell(demo, checkout)
    assert done.returncode == 0, done.stderr
    validate, _, run_output = done.stdout.partition("\n")
    assert validate.startswith("Validation passed: ")
    assert validate.endswith("/fixtures/demo/eval (14 samples, 1 events)")
    assert shape(run_output) == shape(shown)
    assert (checkout / "fixtures" / "demo" / "eval" / "runs" / "results.json").is_file()
    assert done.stderr.startswith("Checkpoint: ")
    done = shell(arms, checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert in_order(loose(arms_shown), loose(done.stdout)), done.stdout
    done = shell(own, checkout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed: " in done.stdout and "/eval (8 samples)" in done.stdout
    assert done.stdout.rstrip("\n").splitlines()[-1].startswith("PASSED: 8 passed in ")
    assert (checkout / "eval" / "runs" / "results.json").is_file()
