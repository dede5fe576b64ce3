"""Arms take stream targets: each arm its own streams' state from the one decode, scored per arm.

A real Python adapter on a real fixture video: it answers the sample target at once and fires
its stream alert ``k`` frames after each onset frame, ``k`` from its arm's config, so every arm's
latency is known; a perturbation arm darkens the frames its adapter gets, which the adapter
reports, so the test sees that arm's pixels were its own.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_eval, read_json, run_cli
from fixturevideos import MANIFEST

pytestmark = pytest.mark.e2e

VIDEO = "cfr_h264.mp4"
TIMES = [Fraction(t) for t in MANIFEST[VIDEO]["frame_times"]]
ONSETS = [round(len(TIMES) * 0.2), round(len(TIMES) * 0.6)]

ADAPTER = """
import json, os
from PIL import ImageStat

def create_evaluator(config):
    return Watcher(config.config)

class Watcher:
    def __init__(self, config):
        self.k = config.get("k", 2)
        self.onsets = config["onsets"]
        self.log = config["log"]
        self.fed = {}

    def evaluate(self, sample, target):
        return {"ok": True}

    def start_stream(self, target, stream):
        self.fed[target.id] = []

    def on_frame(self, sample, target):
        if os.environ.get("ARMS_STREAMS_FAIL_K") == str(self.k):
            raise RuntimeError("stream backend down")
        fed = self.fed[target.id]
        assert not fed or sample.frame_index > fed[-1], "out of order"
        fed.append(sample.frame_index)
        with open(self.log, "a") as handle:
            handle.write(json.dumps([self.k, sample.frame_index, ImageStat.Stat(sample.image.convert("L")).mean[0]])
                         + "\\n")
        if sample.frame_index in [o + self.k for o in self.onsets]:
            return {"alert": "boiling"}
        return None
"""


def case_text() -> str:
    events = "".join(f"      - at: {float(TIMES[i])!r}\n        expect: boiling\n" for i in ONSETS)
    return (f"video: {VIDEO}\ntargets:\n  step:\n    samples: [{{at: 0.5, field: ok, expect: true}}]\n"
            f"  pan:\n    sample_defaults: {{field: alert}}\n    stream: {{window: [0, 0.5]}}\n    events:\n{events}")


@pytest.fixture
def eval_dir(tmp_path: Path) -> Path:
    log = tmp_path / "frames.log"
    config = (f"arms:\n  late:\n    adapter_config: {{k: 4, onsets: {ONSETS}, log: {str(log)!r}}}\n"
              "  dim:\n    perturb: [{brightness: 0.5}]\n")
    root = make_eval(tmp_path, {"c": case_text()}, adapter=ADAPTER, videos=(VIDEO,), config=config)
    (root / "adapter.yaml").write_text(json.dumps({"k": 2, "onsets": ONSETS, "log": str(log)}))
    return root


def frames_log(tmp_path: Path) -> list[list[Any]]:
    return [json.loads(line) for line in (tmp_path / "frames.log").read_text().splitlines()]


def test_run_arm_all_scores_every_arms_streams(tmp_path: Path, eval_dir: Path) -> None:
    report_path = tmp_path / "r.json"
    html = tmp_path / "r.html"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "all", "--output-json", report_path,
                             "--html", html)
    assert code in (0, 1), err
    report = read_json(report_path)
    streams = {s["arm"]: s for s in report["streams"]}
    assert sorted(streams) == ["control", "dim", "late"]
    for arm, stream in streams.items():
        assert (stream["case"], stream["target"], stream["trial"]) == ("c", "pan", 1)
        assert stream["frames_delivered"] == len(TIMES), arm
        assert stream["metrics"]["recall"] == 1.0, arm
    # Each arm's latency is its own adapter's: k frames after each onset.
    for arm, k in (("control", 2), ("dim", 2), ("late", 4)):
        expected = max(TIMES[o + k] - TIMES[o] for o in ONSETS)
        assert streams[arm]["metrics"]["latency_p95_s"] == pytest.approx(float(expected)), arm
    # Every arm was fed every frame once, in order; the perturbation arm got darker pixels.
    fed = frames_log(tmp_path)
    by_mean = {}
    for k, index, mean in fed:
        by_mean.setdefault(index, []).append((k, mean))
    assert all(len(v) == 3 for v in by_mean.values()) and len(by_mean) == len(TIMES)
    darker = [min(m for _k, m in v) < 0.75 * max(m for _k, m in v) for v in by_mean.values()]
    assert sum(darker) >= len(TIMES) - 2
    # The sample target too, per arm; and the arms' stream comparison is in the report.
    assert sorted(r["arm"] for t in report["trials"] for r in t["results"] if r["target"] == "step") == ["control", "dim", "late"]
    compared = {(c["arm"], c["target"]): c for c in report["arm_stream_comparisons"]}
    assert sorted(compared) == [("dim", "pan"), ("late", "pan")]
    late = compared[("late", "pan")]
    assert late["delta_recall"] == 0.0 and late["delta_false_alarms_per_min"] == 0.0
    assert late["delta_latency_p95_s"] == pytest.approx(float(max(TIMES[o + 4] - TIMES[o] for o in ONSETS)
                                                              - max(TIMES[o + 2] - TIMES[o] for o in ONSETS)))
    assert "Streams by arm" in out and "stream pan [late]:" in out
    page = html.read_text()
    assert 'id="arms-streams-table"' in page
    assert page.count('<tr data-arm="late">') == 2 and page.count('<tr data-arm="dim">') == 2  # arms, streams


def test_a_resumed_run_with_arms_reuses_each_arms_finished_streams(tmp_path: Path, eval_dir: Path) -> None:
    checkpoints = tmp_path / "ck"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "late", "--checkpoint-dir", checkpoints,
                             "--keep-checkpoints", "3")
    assert code in (0, 1), err
    (checkpoint,) = [p for p in checkpoints.rglob("records.jsonl")]
    keys = [json.loads(line.split(" ", 1)[1])["key"] for line in checkpoint.read_text().splitlines()[1:]]
    assert sorted(tuple(k) for k in keys if "stream" in k) == [(1, "c", "pan", "stream", "control"),
                                                               (1, "c", "pan", "stream", "late")]


def test_a_run_with_arms_stopped_on_a_stream_error_resumes_every_arms_streams(
        tmp_path: Path, eval_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARMS_STREAMS_FAIL_K", "4")  # the late arm's stream backend is down: fail-fast
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "late", "--checkpoint-dir", tmp_path / "ck")
    assert code == 2, out + err
    assert "on_frame at frame 0" in err and "stream backend down" in err
    resume = next(line for line in err.splitlines() if "--resume" in line)
    checkpoint = resume.split("--resume ", 1)[1].split()[0].strip("`'\".")
    fed_before = len(frames_log(tmp_path))
    monkeypatch.delenv("ARMS_STREAMS_FAIL_K")
    report_path = tmp_path / "r.json"
    code, out, err = run_cli("run", "--resume", checkpoint, "--output-json", report_path)
    assert code == 0, out + err
    # Neither arm's stream had finished: both are fed again from their first frame, each its own.
    after = frames_log(tmp_path)[fed_before:]
    assert sorted(k for k, _i, _m in after) == [2] * len(TIMES) + [4] * len(TIMES)
    report = read_json(report_path)
    streams = {s["arm"]: s for s in report["streams"]}
    assert sorted(streams) == ["control", "late"]
    assert all(s["metrics"]["recall"] == 1.0 and "error" not in s for s in streams.values())
    # The sample target's results were reused from the checkpoint, one per arm.
    assert sorted(r["arm"] for t in report["trials"] for r in t["results"]) == ["control", "late"]


def test_the_html_report_pictures_each_arms_missed_events(tmp_path: Path, eval_dir: Path) -> None:
    """An arm's streams keep their miss frames apart from the control's: `deaf` never fires."""
    from framecode import read_frame_index
    from htmlkit import page_data, thumbnail_images

    config = eval_dir / "config.yaml"
    config.write_text(config.read_text() + f"  deaf:\n    adapter_config: {{k: 1000, onsets: {ONSETS}, "
                      f"log: {str(tmp_path / 'frames.log')!r}}}\n")
    html = tmp_path / "r.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "deaf", "--html", html)
    assert code in (0, 1), err
    text = html.read_text()
    streams = {s["target"]: s for s in page_data(text)["streams"]}
    assert sorted(streams) == ["pan · control", "pan · deaf"]
    assert streams["pan · control"]["misses"] == []
    images = thumbnail_images(text)
    # Each missed event's onset frame, pictured from the run's own decode.
    assert [m[1] for m in streams["pan · deaf"]["misses"]] == ONSETS
    for _at, frame, thumb, _text in streams["pan · deaf"]["misses"]:
        assert thumb is not None and read_frame_index(images[thumb].convert("RGB")) == frame


def test_baseline_diffs_each_arms_streams_with_the_same_arm(tmp_path: Path, eval_dir: Path) -> None:
    """`late` goes deaf between the runs: its events are detected->missed regressions, the control's unchanged."""
    before = tmp_path / "before.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "late", "--output-json", before)
    assert code in (0, 1), err
    config = eval_dir / "config.yaml"
    config.write_text(config.read_text().replace("k: 4,", "k: 1000,"))
    after = tmp_path / "after.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--arm", "late", "--output-json", after,
                             "--baseline", before, "--fail-on-regression")
    assert code == 1, err
    arms = read_json(after)["arms"]
    late, control = arms["late"]["baseline"]["streams"], arms["control"]["baseline"]["streams"]
    assert late["regressions"] == 2 and late["matched_events"] == 2
    assert control["regressions"] == 0 and control["matched_events"] == 2
    gates = {g["name"]: g for g in read_json(after)["gates"]}
    assert gates["late/baseline_regressions"]["passed"] is False
    assert "2 detected->missed events" in gates["late/baseline_regressions"]["message"]
    assert gates["control/baseline_regressions"]["passed"] is True
