"""Is the model looking? Blind arms (blank, mean, shuffle) and ``--max-blind-pass-rate``, end to end.

A real video whose first 8 frames (of 20, 10 fps) are dark and the rest bright; every sample asks
whether its frame is bright. A Python adapter that thresholds the frame's brightness reads its
pixels; one that always answers "bright" does not.
"""

from __future__ import annotations

from pathlib import Path

import av
import pytest
from evalkit import make_eval, read_json, run_cli
from PIL import Image

pytestmark = pytest.mark.e2e

CASE = """\
video: light.mp4
targets:
  bright:
    samples:
    - range: [0, 0.8]
      every_s: 0.1
      field: bright
      expect: false
    - range: [0.8, 2]
      every_s: 0.1
      field: bright
      expect: true
"""

THRESHOLD = """
from PIL import ImageStat

def create_evaluator(config):
    def evaluate(sample, target):
        return {"bright": ImageStat.Stat(sample.image.convert("L")).mean[0] > 128}
    return evaluate
"""

CONSTANT = """
def create_evaluator(config):
    def evaluate(sample, target):
        return {"bright": True}
    return evaluate
"""

DARK_FRAMES = 8


def make_light_video(path: Path) -> None:
    """20 frames at 10 fps, 64x36: the first 8 dark grey, the rest light grey."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 36, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        for i in range(20):
            shade = 30 if i < DARK_FRAMES else 220
            frame = av.VideoFrame.from_image(Image.new("RGB", (64, 36), (shade, shade, shade)))
            frame.pts = i
            for packet in stream.encode(frame.reformat(format="yuv420p")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.fixture
def eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    path = make_eval(tmp_path, {"light": CASE}, adapter=THRESHOLD, videos=())
    make_light_video(path / "cases" / "light.mp4")
    return path


def blind_gate(report: dict[str, object]) -> dict[str, object]:
    gates = report["gates"]
    assert isinstance(gates, list)
    (gate,) = [g for g in gates if g["name"] == "blind_pass_rate"]
    return dict(gate)


def test_an_adapter_that_ignores_its_pixels_fails_the_blind_gate(eval_dir: Path, tmp_path: Path) -> None:
    (eval_dir / "adapter.py").write_text(CONSTANT)
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--perturb", "blank", "--max-blind-pass-rate", "0.5",
                              "--output-json", "r.json", "--junit-xml", "r.xml")
    assert code == 1, out
    report = read_json(tmp_path / "r.json")
    gate = blind_gate(report)
    assert gate["passed"] is False
    assert gate["message"].startswith("blank passes 12 of the 12 control passes (100.0%)")
    assert "blind_pass_rate" in out and 'name="blind_pass_rate"' in (tmp_path / "r.xml").read_text()
    assert report["arms"]["blank"]["spec"] == {"perturb": "blank"}


def test_an_adapter_that_reads_its_pixels_passes_the_blind_gate(eval_dir: Path, tmp_path: Path) -> None:
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--perturb", "blank", "--max-blind-pass-rate", "0.5",
                              "--output-json", "r.json")
    assert code == 0, out
    gate = blind_gate(read_json(tmp_path / "r.json"))
    assert gate["passed"] is True
    # A black frame is "not bright": right only on the 8 dark samples of the 20 the control passes.
    assert gate["message"].startswith("blank passes 8 of the 20 control passes (40.0%)")


def test_shuffle_takes_frames_from_elsewhere_in_the_video_seeded(eval_dir: Path, tmp_path: Path) -> None:
    found = []
    for seed in ("3", "3", "4"):
        code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--perturb", "shuffle", "--perturb", "mean",
                                  "--max-blind-pass-rate", "0.99", "--seed", seed, "--output-json", "r.json")
        report = read_json(tmp_path / "r.json")
        found.append((report["arms"]["shuffle"]["summary"]["passed"], blind_gate(report)["message"]))
        assert code == 1, out  # mean keeps a uniform frame's brightness: this adapter sees through it
    assert found[0] == found[1]
    passed = found[0][0]
    # Frames at least 5 away: a dark sample mostly gets a bright frame and the other way round.
    assert passed < 20


def test_the_blind_gate_needs_a_blind_arm(eval_dir: Path) -> None:
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--perturb", "jpeg:30", "--max-blind-pass-rate", "0.5")
    assert code == 2 and "--max-blind-pass-rate needs a blind arm" in err
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--max-blind-pass-rate", "0.5")
    assert code == 2 and "--max-blind-pass-rate needs arms to compare" in err


def test_shards_carry_the_blind_gate_to_merge_reports(eval_dir: Path, tmp_path: Path) -> None:
    (eval_dir / "adapter.py").write_text(CONSTANT)
    shards = []
    for index in (1, 2):
        path = f"shard-{index}.json"
        code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--shard", f"{index}/2", "--perturb", "blank",
                                  "--max-blind-pass-rate", "0.5", "--output-json", path)
        assert code == 0, out  # a shard is not gated
        assert read_json(tmp_path / path)["shard"]["arms"]["blind"] == ["blank"]
        shards.append(path)
    code, out, _err = run_cli("merge-reports", *shards, "--output-json", "merged.json")
    assert code == 1, out
    gate = blind_gate(read_json(tmp_path / "merged.json"))
    assert gate["passed"] is False and gate["message"].startswith("blank passes 12 of the 12 control passes")
