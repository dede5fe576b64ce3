"""Streams against a baseline (``run --baseline``, ``compare``, ``merge-reports --baseline``).

Event changes are exact: the adapter's emission frames are set per run in adapter.yaml, on the
10 fps fixture, so every latency is a known number of frame intervals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

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
    - at: 1.2
      expect: boiling
    - at: 1.8
      expect: boiling
"""

ADAPTER = """
def create_evaluator(config):
    return Streamer(config.config)

class Streamer:
    def __init__(self, plan):
        self.plan = plan

    def on_frame(self, sample, target):
        if sample.frame_index in self.plan["fire"]:
            return {"alert": "boiling"}
        return None
"""


def run_with(eval_dir: Path, fire: list[int], report: Path, *options: str | Path) -> tuple[int, str, str]:
    (eval_dir / "adapter.yaml").write_text(json.dumps({"fire": fire}))
    return run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *options)


def test_detected_to_missed_is_a_regression_and_latency_and_false_alarms_are_compared(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    eval_dir = make_eval(tmp_path, {"c": CASE})
    (eval_dir / "adapter.py").write_text(ADAPTER)
    base = tmp_path / "base.json"
    # Baseline: 0.3 at +0.2 s, 1.2 at +0.1 s, 1.8 missed; one false alarm (frame 9).
    assert run_with(eval_dir, [5, 9, 13], base)[0] == 0
    # Candidate: 0.3 at +0.1 s, 1.2 missed, 1.8 at 0 s; false alarms at frames 9 and 10.
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = run_with(eval_dir, [4, 9, 10, 18], tmp_path / "new.json", "--baseline", base,
                              "--fail-on-regression", "--annotations", "github")
    assert code == 1, err
    block = read_json(tmp_path / "new.json")["baseline"]
    assert block["regressions"] == 1
    streams = block["streams"]
    assert streams["counts"] == {"detected_to_missed": 1, "missed_to_detected": 1, "latency_changed": 1,
                                 "added": 0, "removed": 0}
    assert streams["matched_events"] == 3
    events = {(e["kind"], e["at"]): e for e in streams["events"]}
    lost = events[("detected_to_missed", 1.2)]
    assert (lost["baseline_detected"], lost["detected"], lost["latency_s"]) == (True, False, None)
    assert lost["baseline_latency_s"] == pytest.approx(0.1)
    found = events[("missed_to_detected", 1.8)]
    assert (found["baseline_detected"], found["detected"], found["latency_s"]) == (False, True, 0.0)
    faster = events[("latency_changed", 0.3)]
    assert faster["latency_change_s"] == pytest.approx(-0.1)
    assert streams["false_alarms"] == [{"baseline_false_alarms": 1.0, "case": "c", "change": 1.0,
                                        "false_alarms": 2.0, "target": "pan"}]
    gates = {g["name"]: g for g in read_json(tmp_path / "new.json")["gates"]}
    assert gates["baseline_regressions"]["passed"] is False
    assert "1 detected->missed events" in gates["baseline_regressions"]["message"]
    assert "Streams: 3 events matched; 1 detected->missed, 1 missed->detected, 1 latency changed" in out
    assert "Event changes against the baseline" in out and "False alarm changes" in out
    text = summary.read_text()
    assert "Streams: 3 events matched" in text and "detected_to_missed" in text

    # compare: the same comparison from the two reports, and its gate.
    code, out, err = run_cli("compare", base, tmp_path / "new.json", "--fail-on-regression",
                             "--output-json", tmp_path / "cmp.json")
    assert code == 1, err
    assert read_json(tmp_path / "cmp.json")["streams"] == streams

    # No stream changed: no regression; a run without streams on either side has no `streams` block.
    code, out, err = run_with(eval_dir, [5, 9, 13], tmp_path / "same.json", "--baseline", base,
                              "--fail-on-regression")
    assert code == 0, out + err
    same = read_json(tmp_path / "same.json")["baseline"]["streams"]
    assert same["events"] == [] and same["regressions"] == 0


def test_with_repeat_an_event_missed_in_any_trial_counts_as_missed(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE})
    (eval_dir / "adapter.py").write_text(ADAPTER.replace(
        "    def __init__(self, plan):\n        self.plan = plan",
        "    trials = 0\n\n    def __init__(self, plan):\n        Streamer.trials += 1\n"
        "        self.plan = plan if Streamer.trials % 2 else {'fire': []}"))
    base = tmp_path / "base.json"
    (eval_dir / "adapter.yaml").write_text(json.dumps({"fire": [5]}))
    assert run_cli("run", "--eval-dir", eval_dir, "--output-json", base)[0] == 0
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", tmp_path / "new.json",
                              "--repeat", "2", "--baseline", base, "--fail-on-regression")
    assert code == 1, err
    (change,) = read_json(tmp_path / "new.json")["baseline"]["streams"]["events"]
    assert (change["kind"], change["at"], change["detected"]) == ("detected_to_missed", 0.3, False)
