"""Helpers that build eval directories for end-to-end tests."""

from __future__ import annotations

import io
import json
import shutil
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

from resumekit import run_until_signalled

from glasskit_eval.cases.model import Case
from glasskit_eval.cases.parse import parse_case
from glasskit_eval.cli import main
from glasskit_eval.errors import Problem
from glasskit_eval.yamltext.source import load_yaml_file

ROOT = Path(__file__).resolve().parent.parent
VIDEOS = ROOT / "fixtures" / "videos"
TESTS = ROOT / "tests"


def make_eval(tmp_path: Path, cases: dict[str, str], adapter: str | None = None,
              videos: tuple[str, ...] = ("cfr_h264.mp4",), config: str | None = None) -> Path:
    eval_dir = tmp_path / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    for name in videos:
        shutil.copy(VIDEOS / name, eval_dir / "cases" / name)
    for name, text in cases.items():
        (eval_dir / "cases" / f"{name}.yaml").write_text(textwrap.dedent(text))
    if adapter is not None:
        (eval_dir / "adapter.py").write_text(textwrap.dedent(adapter))
    if config is not None:
        (eval_dir / "config.yaml").write_text(textwrap.dedent(config))
    return eval_dir


def make_clip_case(tmp_path: Path, text: str) -> Path:
    """``eval/cases/clip.yaml`` holding ``text`` (written as is) beside ``clip.mp4``, a copy of
    the 2 s constant-rate fixture; returns the case file's path."""
    cases = tmp_path / "eval" / "cases"
    cases.mkdir(parents=True)
    shutil.copy(VIDEOS / "cfr_h264.mp4", cases / "clip.mp4")
    path = cases / "clip.yaml"
    path.write_bytes(text.encode())
    return path


def load_case(path: Path, *, allow_empty: bool = False) -> tuple[Case | None, list[Problem]]:
    """One case file loaded and checked as ``validate`` would: the case (None if unusable) and its problems."""
    doc, problems = load_yaml_file(path)
    if problems:
        return None, problems
    return parse_case(doc, path, allow_empty=allow_empty)


def run_cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


#: An adapter that reports which frame it got (read from the pixels) and how big it was.
FRAMECODE_ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Reader()

class Reader:
    def evaluate(self, sample, target):
        return {{"index": read_frame_index(sample.image), "frame_index": sample.frame_index,
                 "size": list(sample.image.size)}}
"""


def interrupt_when_marked(argv: list[str], mark: Path, signum: int | None = None) -> tuple[int, str]:
    """Run ``python -m glasskit_eval *argv``, signal it (SIGINT) once ``mark`` exists; returns (code, stderr)."""
    code, _out, err = run_until_signalled([sys.executable, "-m", "glasskit_eval", *argv], mark.exists,
                                          signum=signal.SIGINT if signum is None else signum, cwd=ROOT, poll=0.05)
    return code, err
