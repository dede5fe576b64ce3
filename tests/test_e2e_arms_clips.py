"""Clip samples with arms: one decode of every distinct clip frame, the same frames to every arm,
and perturbation arms' every clip frame perturbed, seeded by the frame's own time.

Frames carry their index in their pixels; the adapter reports, per clip frame, the index it reads
from the pixels, the index it was told and the frame's mean brightness.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, TESTS, make_eval, read_json, run_cli
from test_e2e_arms import by_arm, decoded  # noqa: F401  (decoded is a fixture)

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0.4, 1.6]
      every_s: 0.2
      field: ok
      expect: true
      clip: {before_s: 0.3, every_s: 0.1}
"""

ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index
from PIL import ImageStat

def read(image):
    try:
        return read_frame_index(image)
    except ValueError:
        return None

def create_evaluator(config):
    def evaluate(sample, target):
        frames = sample.frames
        return {{"ok": True, "seen": [read(f.image) for f in frames], "told": [f.frame_index for f in frames],
                 "times": [f.timestamp_s for f in frames],
                 "means": [round(ImageStat.Stat(f.image.convert("L")).mean[0], 4) for f in frames]}}
    return evaluate
"""

SERVER = ROOT / "glasskit_eval" / "protocol_server.py"
CONFIG = f"""\
arms:
  cmd: {{adapter_command: '{sys.executable} {SERVER} eval/adapter.py:create_evaluator'}}
  dim: {{perturb: [{{brightness: 0.5}}]}}
"""
ARMS = ("--arm", "control", "--arm", "cmd", "--arm", "dim", "--perturb", "noise:12", "--seed", "3")


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER, config=CONFIG)


def observed(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {arm: [r["observed"] for r in results] for arm, results in by_arm(report).items()}


def test_every_arm_gets_the_same_clip_frames_from_one_decode(eval_dir: Path, tmp_path: Path,
                                                             decoded: list[int]) -> None:  # noqa: F811
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "plain.json")
    assert code == 0, err
    plain_decodes = sorted(decoded)
    decoded.clear()
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "arms.json", *ARMS)
    assert code == 0, err
    # One decode for four arms: each distinct clip frame once, exactly as a plain run decodes them.
    assert sorted(decoded) == plain_decodes == list(range(1, 15))
    plain = [r["clip"] for r in read_json(tmp_path / "plain.json")["trials"][0]["results"]]
    report = read_json(tmp_path / "arms.json")
    seen = observed(report)
    assert list(seen) == ["control", "cmd", "dim", "noise:12"]
    for arm, results in by_arm(report).items():
        # Every arm: the plain run's clips, frame for frame (6 samples, 4 frames each).
        assert [r["clip"] for r in results] == plain, arm
        assert [o["told"] for o in seen[arm]] == [c["frame_indexes"] for c in plain], arm
    expected = [[i - 3, i - 2, i - 1, i] for i in range(4, 15, 2)]
    assert [c["frame_indexes"] for c in plain] == expected
    # The unperturbed arms read each frame's own index from its pixels.
    assert [o["seen"] for o in seen["control"]] == [o["seen"] for o in seen["cmd"]] == expected
    # Every clip frame of the dimmed arm is dimmed, not only the sample's own frame.
    for control, dim in zip(seen["control"], seen["dim"]):
        assert dim["means"] == pytest.approx([m * 0.5 for m in control["means"]], abs=1.0)
    # Noise on every clip frame: each frame's mean moves, but not by much.
    for control, noisy in zip(seen["control"], seen["noise:12"]):
        assert all(a != b and abs(a - b) < 3 for a, b in zip(control["means"], noisy["means"]))


def test_clip_perturbations_are_seeded_per_frame_time_and_repeat_exactly(eval_dir: Path, tmp_path: Path) -> None:
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", "one.json", *ARMS)[0] == 0
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", "two.json", *ARMS)[0] == 0
    one, two = observed(read_json(tmp_path / "one.json")), observed(read_json(tmp_path / "two.json"))
    assert one["noise:12"] == two["noise:12"] and one["dim"] == two["dim"]
    # Overlapping clips ask for the same frame at the same time: the same noise, whichever sample.
    by_time: dict[float, set[float]] = {}
    for o in one["noise:12"]:
        for time, mean in zip(o["times"], o["means"]):
            by_time.setdefault(round(time, 6), set()).add(mean)
    shared = [t for t in by_time if sum(round(x, 6) == t for o in one["noise:12"] for x in o["times"]) > 1]
    assert shared and all(len(by_time[t]) == 1 for t in shared)
    # A different frame time, different noise: the means are not one pattern shifted.
    assert len({round(m - c, 4) for o, p in zip(one["noise:12"], one["control"])
                for m, c in zip(o["means"], p["means"])}) > 1
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", "other.json", *ARMS[:-1], "4")[0] == 0
    assert observed(read_json(tmp_path / "other.json"))["noise:12"] != one["noise:12"]


def test_an_arm_whose_function_adapter_takes_one_image_is_refused_on_clips(eval_dir: Path) -> None:
    (eval_dir / "fn.py").write_text("def judge(image, target_id):\n    return {'ok': True}\n")
    (eval_dir / "config.yaml").write_text(CONFIG + "  fn: {adapter: 'eval/fn.py:judge'}\n")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "control", "--arm", "fn")
    assert code == 2, err
    assert "arm 'fn': adapter" in err and "has clip samples; take `sample, target` instead" in err
    assert "Traceback" not in err
