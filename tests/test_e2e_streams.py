"""Stream targets end to end: a scripted stream adapter on self-identifying fixture videos.

The adapter reads each frame's index from its pixels, so what it was fed (and in which order) is
known without trusting timestamps; it fires ``K`` frames after each onset, so every latency is a
known rational (``K / fps`` on constant-rate videos), and it adds repeats and spurious emissions
whose count and times are known too.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, make_eval, read_json, run_cli
from fixturevideos import MANIFEST

from glasskit_eval.statistics.descriptive import percentile
from glasskit_eval.video.probe import probe

pytestmark = pytest.mark.e2e

K = 2
WINDOW = Fraction(1, 2)

#: Fires K frames after each onset frame (and once more after the first: a repeat), answers the
#: last event with a wrong value (a repeat, the event is missed), and emits spuriously on the
#: given frames. It fails the run if frames come out of order or two at once.
SCRIPTED = f"""
import json, sys, threading
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

class Scripted:
    def __init__(self, config):
        self.plan = config.config
        self.busy = {{}}
        self.seen = {{}}
        self.lock = threading.Lock()

    def start_stream(self, target, stream):
        assert stream.case == "c" and stream.pace is None, stream
        self.seen[target.id] = []

    def on_frame(self, sample, target):
        with self.lock:
            assert not self.busy.get(target.id), "two frames of one stream at once"
            self.busy[target.id] = True
        try:
            index = read_frame_index(sample.image)
            assert index == sample.frame_index, (index, sample.frame_index)
            seen = self.seen[target.id]
            assert not seen or index > seen[-1], ("out of order", seen[-1], index)
            seen.append(index)
            onsets, k = self.plan["onsets"], self.plan["k"]
            out = []
            if index == onsets[0] + k or index == onsets[0] + k + 1 or index == onsets[1] + k:
                out.append({{"alert": "boiling", "frame": index}})
            if index == onsets[2] + 1:
                out.append({{"alert": "smoke", "frame": index}})
            if index in self.plan["spurious"]:
                out.append({{"alert": "boiling", "frame": index}})
            if self.plan.get("echo"):
                out.append({{"alert": "frame", "frame": index}})
            return out or None
        finally:
            self.busy[target.id] = False

def create_evaluator(config):
    return Scripted(config)
"""


def times_of(video: str) -> list[Fraction]:
    return [Fraction(t) for t in MANIFEST[video]["frame_times"]]


def scenario(video: str) -> dict[str, Any]:
    """Onset frames at about 15%, 50% and 80% of the clip, and two spurious frames outside every window."""
    times = times_of(video)
    count = len(times)
    onsets = [round(count * 0.15), round(count * 0.5), round(count * 0.8)]
    # As the case file writes them: the shortest decimal of each onset frame's time (exact in the case).
    ats = [Fraction(repr(float(times[i]))) for i in onsets]
    spans = [(at, at + WINDOW) for at in ats]
    outside = [i for i, t in enumerate(times) if not any(a <= t <= b for a, b in spans)]
    spurious = [outside[0], next(i for i in outside if times[i] > spans[0][1])]
    return {"onsets": onsets, "ats": ats, "spurious": spurious, "times": times}


def case_text(video: str, ats: list[Fraction], extra: str = "") -> str:
    events = "".join(f"      - at: {float(at)!r}\n        expect: boiling\n" for at in ats)
    return (f"video: {video}\ntargets:\n  pan:\n    sample_defaults: {{field: alert}}\n"
            f"    stream: {{window: [0, {float(WINDOW)}]}}\n    events:\n{events}{extra}")


def write_eval(tmp_path: Path, video: str, config: dict[str, Any], text: str) -> Path:
    eval_dir = make_eval(tmp_path, {"c": text}, adapter=SCRIPTED, videos=(video,))
    (eval_dir / "adapter.yaml").write_text(json.dumps(config))
    return eval_dir


@pytest.mark.parametrize("video", ["cfr_h264.mp4", "vfr_h264.mp4", "bframes_h264.mp4"])
def test_scripted_stream_scores_exactly(tmp_path: Path, video: str) -> None:
    s = scenario(video)
    times, onsets, ats = s["times"], s["onsets"], s["ats"]
    eval_dir = write_eval(tmp_path, video, {"onsets": onsets, "k": K, "spurious": s["spurious"]},
                          case_text(video, ats))
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert code == 0, err
    (stream,) = read_json(report)["streams"]
    assert (stream["case"], stream["target"], stream["trial"], stream["pace"]) == ("c", "pan", 1, None)
    assert stream["frames_delivered"] == len(times) and stream["frames_dropped"] == 0

    latencies = [times[onsets[0] + K] - ats[0], times[onsets[1] + K] - ats[1]]
    assert all(0 < latency <= WINDOW for latency in latencies)
    if video != "vfr_h264.mp4":
        fps = Fraction(MANIFEST[video]["average_rate"])
        assert latencies == [K / fps, K / fps]
    first, second, third = stream["events"]
    assert first == {"at": float(ats[0]), "emission": {"time_s": float(times[onsets[0] + K]),
                                                      "value": {"alert": "boiling", "frame": onsets[0] + K}},
                     "expect": "boiling", "index": 0, "latency_s": float(latencies[0]), "status": "detected",
                     "window_s": [float(ats[0]), float(ats[0] + WINDOW)]}
    assert second["latency_s"] == float(latencies[1]) and second["status"] == "detected"
    assert third["status"] == "missed" and third["emission"] is None and third["latency_s"] is None
    assert stream["repeats"] == [
        {"time_s": float(times[onsets[0] + K + 1]), "value": {"alert": "boiling", "frame": onsets[0] + K + 1}},
        {"time_s": float(times[onsets[2] + 1]), "value": {"alert": "smoke", "frame": onsets[2] + 1}}]
    assert stream["false_alarms"] == [{"time_s": float(times[i]), "value": {"alert": "boiling", "frame": i}}
                                      for i in s["spurious"]]

    end = probe(eval_dir / "cases" / video).end_time
    quiet = end - sum(min(at + WINDOW, end) - at for at in ats)
    ordered = tuple(sorted(latencies))
    assert stream["metrics"] == {
        "events": 3, "detected": 2, "missed": 1, "recall": float(Fraction(2, 3)), "repeats": 2, "false_alarms": 2,
        "precision": 0.5, "quiet_s": float(quiet), "false_alarms_per_min": float(2 / (quiet / 60)),
        "latency_p50_s": float(percentile(ordered, 50)), "latency_p95_s": float(percentile(ordered, 95)),
        "latency_max_s": float(ordered[-1])}
    assert "Streams" in out and "2/3" in out


def _gates(tmp_path: Path, *options: str) -> tuple[int, dict[str, bool]]:
    s = scenario("cfr_h264.mp4")
    eval_dir = write_eval(tmp_path, "cfr_h264.mp4", {"onsets": s["onsets"], "k": K, "spurious": s["spurious"]},
                          case_text("cfr_h264.mp4", s["ats"]))
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *options)
    assert code in (0, 1), err
    return code, {g["name"]: g["passed"] for g in read_json(report)["trials"][0]["gates"]}


def test_cfr_figures_the_gates_are_judged_on() -> None:
    s = scenario("cfr_h264.mp4")
    # Onsets 0.3, 1.0, 1.6 with windows of 0.5 s; the third is clamped at the clip's end (2.0 s).
    assert s["ats"] == [Fraction(3, 10), Fraction(1), Fraction(8, 5)]
    # Recall 2/3, 2 false alarms in 2.0 - 0.5 - 0.5 - 0.4 = 0.6 s of quiet time: 200 per minute;
    # p95 latency 0.2 s.


@pytest.mark.parametrize(("option", "value", "passes"), [
    ("--min-recall", "0.6666666666666666", True), ("--min-recall", "0.667", False),
    ("--max-false-alarms-per-min", "200", True), ("--max-false-alarms-per-min", "199.999", False),
    ("--max-detection-latency-p95", "0.2", True), ("--max-detection-latency-p95", "0.199", False),
])
def test_each_stream_gate_passes_and_fails_at_its_boundary(tmp_path: Path, option: str, value: str,
                                                          passes: bool) -> None:
    code, gates = _gates(tmp_path, option, value)
    name = {"--min-recall": "pan_min_recall", "--max-false-alarms-per-min": "pan_max_false_alarms_per_min",
            "--max-detection-latency-p95": "pan_max_detection_latency_p95"}[option]
    assert gates[name] is passes
    assert code == (0 if passes else 1)


def test_config_yaml_stream_gates_and_the_option_that_replaces_them(tmp_path: Path) -> None:
    s = scenario("cfr_h264.mp4")
    eval_dir = write_eval(tmp_path, "cfr_h264.mp4", {"onsets": s["onsets"], "k": K, "spurious": s["spurious"]},
                          case_text("cfr_h264.mp4", s["ats"]))
    (eval_dir / "config.yaml").write_text("thresholds:\n  per_target:\n    pan: {min_recall: 0.7, "
                                          "max_detection_latency_p95_s: 0.2}\n")
    report = tmp_path / "r.json"
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    gates = {g["name"]: g for g in read_json(report)["trials"][0]["gates"]}
    assert code == 1 and gates["pan_min_recall"]["passed"] is False
    assert gates["pan_min_recall"]["message"] == "recall 66.7% (2/3 events) (gate: >= 70.0%)"
    assert gates["pan_max_detection_latency_p95"]["passed"] is True
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--min-recall", "0.5")
    gates = {g["name"]: g for g in read_json(report)["trials"][0]["gates"]}
    assert code == 0 and gates["pan_min_recall"]["passed"] is True


def test_every_s_feeds_exactly_the_grids_nearest_frames(tmp_path: Path) -> None:
    text = ("video: cfr_h264.mp4\ntargets:\n  pan:\n    sample_defaults: {field: alert}\n"
            "    stream: {every_s: 0.25}\n    events:\n      - at: 0\n        expect: never\n        window: [0, 0.01]\n")
    eval_dir = write_eval(tmp_path, "cfr_h264.mp4", {"onsets": [-9, -9, -9], "k": K, "spurious": [], "echo": True},
                          text)
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert code == 0, err
    (stream,) = read_json(report)["streams"]
    fed = [e["value"]["frame"] for e in stream["repeats"] + stream["false_alarms"]]
    # Grid 0, 0.25, ..., 2.0 on a 10 fps clip: 0.25 is a tie between 0.2 and 0.3 (the earlier wins),
    # 2.0 is past the last frame (1.9).
    assert fed == [0, 2, 5, 7, 10, 12, 15, 17, 19]
    assert stream["frames_delivered"] == 9


def test_an_adapter_without_on_frame_stops_the_run_before_any_call(tmp_path: Path) -> None:
    marker = tmp_path / "called"
    adapter = f"""
def create_evaluator(config):
    return Plain()

class Plain:
    def evaluate(self, sample, target):
        open({str(marker)!r}, "a").write("x")
        return 1
"""
    text = ("video: cfr_h264.mp4\ntargets:\n  step:\n    samples: [{at: 0.5, expect: 1}]\n"
            "  pan:\n    events: [{at: 1, expect: x}]\n")
    eval_dir = make_eval(tmp_path, {"c": text}, adapter=adapter)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert "target 'pan' of case 'c'" in err and "on_frame(sample, target)" in err
    assert "Traceback" not in err and not marker.exists()


def test_junit_and_annotations_show_events_and_false_alarms(tmp_path: Path) -> None:
    s = scenario("cfr_h264.mp4")
    eval_dir = write_eval(tmp_path, "cfr_h264.mp4", {"onsets": s["onsets"], "k": K, "spurious": s["spurious"]},
                          case_text("cfr_h264.mp4", s["ats"]))
    junit = tmp_path / "j.xml"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--junit-xml", junit, "--annotations", "github")
    assert code == 0, err
    suite = next(x for x in ET.parse(junit).getroot() if x.get("name") == "c / pan stream")
    cases = {c.get("name"): c for c in suite}
    # Times as sample testcases show them (time_label: no trailing zeros).
    assert sorted(cases) == ["pan event @ 0.3s", "pan event @ 1.6s", "pan event @ 1s",
                             "pan false alarm @ 0.9s", "pan false alarm @ 0s"]
    assert (suite.get("tests"), suite.get("failures")) == ("5", "3")
    assert cases["pan event @ 0.3s"].find("failure") is None
    assert cases["pan event @ 0.3s"].get("line") == "7"
    assert cases["pan event @ 1.6s"].find("failure") is not None
    assert cases["pan false alarm @ 0.9s"].find("failure").get("type") == "false_alarm"  # type: ignore[union-attr]
    missed = [line for line in out.splitlines() if line.startswith("::error") and "event @ 1.6s missed" in line]
    assert len(missed) == 1 and "line=11" in missed[0] and "cases/c.yaml" in missed[0]


SLOW = """
import time

class Slow:
    def on_frame(self, sample, target):
        time.sleep(0.2)  # two frame intervals of the 10 fps clip at --pace 1
        return {"alert": "frame", "frame": sample.frame_index}

def create_evaluator(config):
    return Slow()
"""


def test_paced_clock_drops_about_half_the_frames_of_an_adapter_twice_too_slow(tmp_path: Path) -> None:
    text = ("video: cfr_h264.mp4\ntargets:\n  pan:\n    sample_defaults: {field: alert}\n"
            "    events:\n      - at: 0\n        expect: never\n        window: [0, 0.01]\n")
    eval_dir = make_eval(tmp_path, {"c": text}, adapter=SLOW)
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--pace", "1.0")
    assert code == 0, err
    (stream,) = read_json(report)["streams"]
    delivered, dropped = stream["frames_delivered"], stream["frames_dropped"]
    assert stream["pace"] == 1.0
    # Every frame is delivered or replaced by a newer one; generous bounds around "half".
    assert delivered + dropped <= 20 and 4 <= delivered <= 14 and dropped >= 5
    answers = stream["repeats"] + stream["false_alarms"]
    assert len(answers) == delivered
    frames = [a["value"]["frame"] for a in answers]
    assert frames == sorted(frames) and len(set(frames)) == len(frames)
    # An answer arrives after its frame's media time (processing time is latency): staleness > 0.
    assert all(a["time_s"] > float(Fraction(f, 10)) for a, f in zip(answers, frames))
    assert stream["staleness"]["p50_s"] > 0 and stream["staleness"]["p95_s"] >= stream["staleness"]["p50_s"]


@pytest.mark.parametrize("columns", [80, 120])
def test_a_stream_only_run_on_a_terminal_shows_frames_fed_and_fits_it(tmp_path: Path, columns: int) -> None:
    import re

    from ptykit import run_in_pty

    from glasskit_eval.reports.tables import time_label

    s = scenario("cfr_h264.mp4")
    eval_dir = write_eval(tmp_path, "cfr_h264.mp4", {"onsets": s["onsets"], "k": K, "spurious": s["spurious"]},
                          case_text("cfr_h264.mp4", s["ats"]))
    frames = len(s["times"])
    result = run_in_pty(["run", "--eval-dir", str(eval_dir)], cwd=tmp_path, columns=columns)
    assert result.returncode == 0, result.text
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", result.text)
    assert f"case 1/1 c · 0/{frames} stream frames · 0:00 elapsed" in text
    assert "0 samples" not in text and "By target" not in text
    # Every line but the ones naming a path (the checkpoint's, the eval dir's) fits the terminal.
    lines = [part for line in text.split("\r\n") for part in line.split("\r") if str(tmp_path) not in part]
    assert max(len(line) for line in lines) <= min(columns, 80), [line for line in lines if len(line) > 80]
    missed = f"{float(s['ats'][2]):g}s"
    alarms = [f"false alarm @ {time_label(float(s['times'][i]))}s" for i in s["spurious"]]
    assert f"missed event @ {missed}" in text and all(a in text for a in alarms)
    verdict = text[text.rindex("NOT GATED: "):].replace("\r\n ", "").rstrip()
    assert verdict.startswith("NOT GATED: 1 of 3 events missed, 2 false alarms in ")
    assert verdict.endswith("; no gate is set")
