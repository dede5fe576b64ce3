"""Trials (glasskit_eval.evaluation.trials): what a batch adapter is told about the memory its calls need."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import av
import pytest
from evalkit import ROOT, make_eval, run_cli

import glasskit_eval.evaluation.trials as trials

pytestmark = pytest.mark.frames

CASE = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0, 1.5]\n      expect: true\n"
BATCH = ("class E:\n    def evaluate_many(self, samples, target):\n        return [True for _ in samples]\n\n"
         "def create_evaluator(config):\n    return E()\n")


def test_a_batch_that_needs_more_frame_memory_than_the_budget_is_warned_about_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE}, BATCH)
    # Three images of a 128x72 clip, 4 bytes a pixel as Pillow keeps RGB.
    monkeypatch.setattr(trials, "BATCH_MEMORY_WARN_BYTES", 3 * 128 * 72 * 4 - 1)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--repeat", "2")
    assert code == 0, out + err
    warning = "warning: evaluate_many for c/t gets 3 frames of 128x72 at once: about 0 MiB while the call runs"
    assert out.count(warning) == 1, out
    monkeypatch.setattr(trials, "BATCH_MEMORY_WARN_BYTES", 3 * 128 * 72 * 4)
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0 and "evaluate_many for" not in out


def make_gray_video(path: Path, width: int, height: int, frames: int) -> None:
    """``frames`` frames at 10 fps, each a different shade of grey."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        for i in range(frames):
            frame = av.VideoFrame(width, height, "yuv420p")
            frame.planes[0].update(bytes([(i * 3) & 255]) * (width * height))
            frame.planes[1].update(bytes([128]) * (width * height // 4))
            frame.planes[2].update(bytes([128]) * (width * height // 4))
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


#: Reads its process's resident set when created and while ``evaluate_many`` holds the frames.
MEASURING_BATCH = """
import json, os

def rss(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024

class E:
    def __init__(self):
        self.before = rss("VmRSS:")
    def evaluate_many(self, samples, target):
        self.during = rss("VmRSS:")
        return [True for _ in samples]
    def close(self):
        with open(os.environ["MEASURED"], "w") as out:
            json.dump({"before": self.before, "during": self.during, "peak": rss("VmHWM:")}, out)

def create_evaluator(config):
    return E()
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the resident set from /proc")
def test_the_batch_memory_warning_matches_the_measured_peak_within_a_quarter(tmp_path: Path) -> None:
    # 250 frames of 640x480: 293 MiB of images, where reusing freed blocks once grew the
    # process by 1.8 times that.
    eval_dir = make_eval(tmp_path, {"c": "video: v.mp4\ntargets:\n  t:\n    samples:\n    - range: [0, 25]\n"
                                         "      every_s: 0.1\n      expect: true\n"}, MEASURING_BATCH, videos=())
    make_gray_video(eval_dir / "cases" / "v.mp4", 640, 480, 250)
    measured = tmp_path / "measured.json"
    # A real run in its own process (its RSS is the run's alone), warning from the first byte.
    script = ("import sys\nimport glasskit_eval.evaluation.trials as trials\n"
              "trials.BATCH_MEMORY_WARN_BYTES = 0\nfrom glasskit_eval.cli import main\n"
              f"sys.exit(main(['run', '--eval-dir', {str(eval_dir)!r}]))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MEASURED": str(measured)})
    assert done.returncode == 0, done.stdout + done.stderr
    warned = re.search(r"evaluate_many for c/t gets 250 frames of 640x480 at once: about ([\d,]+) MiB while", done.stdout)
    assert warned, done.stdout
    estimate = int(warned.group(1).replace(",", "")) << 20
    rss = json.loads(measured.read_text())
    held, peak = rss["during"] - rss["before"], rss["peak"] - rss["before"]
    assert abs(held - estimate) <= estimate / 4, (held >> 20, estimate >> 20)
    assert abs(peak - estimate) <= estimate / 4, (peak >> 20, estimate >> 20)


def test_a_field_most_observations_lack_is_named_with_the_keys_they_have() -> None:
    from glasskit_eval.compare.values import MissingField
    from glasskit_eval.results import SampleResult, Status

    def one(index: int, observed: object, reason: str, status: Status) -> SampleResult:
        return SampleResult(case="walk", target="door", target_label=None, sample_index=index, timestamp_s=float(index),
                            source="at", status=status, expected=True, field="state.open", compare_mode=None,
                            reason=reason, observed=observed, observed_value=None)

    missing = MissingField("state.open").reason
    lacking = [one(i, {"state": {"opn": True, "score": 0.9}}, missing, Status.FAILED) for i in range(3)]
    having = one(3, {"state": {"open": True}}, "", Status.PASSED)
    (note,) = trials.missing_field_notes([*lacking, having])
    assert note == ("field `state.open` is missing from 3 of 4 observations of walk/door (4 samples): "
                    "at `state` the observation has keys: opn, score")
    # Half or fewer lacking it: a labelling question, not a wrong path.
    assert trials.missing_field_notes([lacking[0], having]) == []
