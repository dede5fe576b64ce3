"""Streams stay bounded whatever the adapter or the command line says: emissions per call and per
stream are capped (as answer lines are), and ``--pace`` is bounded, so a run always ends."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evalkit import ROOT, make_eval, read_json, run_cli

from glasskit_eval.evaluation import streams as streams_module

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  pan:
    sample_defaults: {field: alert}
    stream: {window: [0, 0.5]}
    events:
    - at: 0.3
      expect: boiling
"""

#: Answers ``PER_FRAME`` emissions (from adapter.yaml) to every frame.
FLOOD = """
class Flood:
    def __init__(self, count):
        self.count = count

    def on_frame(self, sample, target):
        return [{"alert": "boiling", "n": i} for i in range(self.count)]

def create_evaluator(config):
    return Flood(config.config["per_frame"])
"""


def flood_eval(tmp_path: Path, per_frame: int) -> Path:
    eval_dir = make_eval(tmp_path, {"c": CASE}, adapter=FLOOD)
    (eval_dir / "adapter.yaml").write_text(f"per_frame: {per_frame}\n")
    return eval_dir


def test_a_million_emissions_per_frame_end_the_stream_under_a_memory_limit(tmp_path: Path) -> None:
    eval_dir = flood_eval(tmp_path, 10**6)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(eval_dir), "--keep-going",
                           "--output-json", str(tmp_path / "r.json")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, preexec_fn=limit, stdin=subprocess.DEVNULL)
    assert time.monotonic() - started < 120
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "out of memory" not in done.stderr
    (stream,) = read_json(tmp_path / "r.json")["streams"]
    assert "returned 1000000 emissions after 0; a stream makes at most 1,000 per call" in stream["error"]
    assert stream["frames_delivered"] == 1


def test_a_stream_stops_at_its_emission_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cap lowered so that the 2 s fixture reaches it: 7 emissions a frame, at most 30 a stream.
    monkeypatch.setattr(streams_module, "MAX_EMISSIONS_PER_STREAM", 30)
    eval_dir = flood_eval(tmp_path, 7)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", tmp_path / "r.json")
    assert code == 1, err
    (stream,) = read_json(tmp_path / "r.json")["streams"]
    assert "returned 7 emissions after 28; a stream makes at most 1,000 per call and 30 in all" in stream["error"]
    assert stream["frames_delivered"] == 5


@pytest.mark.parametrize("pace", ["1e-300", "0.001", "1e9", "0"])
def test_a_pace_out_of_bounds_is_refused_before_any_call(tmp_path: Path, pace: str) -> None:
    eval_dir = flood_eval(tmp_path, 1)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--pace", pace)
    assert code == 2 and f"--pace: must be from 0.01 to 1000, got {pace}" in err, err
    assert "Traceback" not in err
