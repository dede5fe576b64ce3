"""Streams read back from JSON reports (``report``, ``merge-reports``) and kept whole by ``--shard``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_eval, read_json, run_cli

from glasskit_eval.reports.loading import load_report_file, run_from_reports

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  door:
    samples:
    - range: [0, 2]
      every_s: 0.25
      expect: {{ok: true}}
  pan:
    sample_defaults: {{field: alert}}
    stream: {{window: [0, 0.5]}}
    events:
    - at: 0.3
      expect: boiling
    - at: 1.2
      expect: boiling
  bell:
    sample_defaults: {{field: alert}}
    stream: {{window: [0, 0.3], every_s: {every}}}
    events:
    - at: 0.5
      expect: ring
"""

#: Exact, frame-index-driven emissions: pan fires 2 frames after its onsets (case "b" misses the
#: second), bell answers at frame 6, both raise a false alarm at frame 9 (10 fps clip).
ADAPTER = """
class Streamer:
    def evaluate(self, sample, target):
        return {"ok": sample.frame_index % 3 != 0}

    def start_stream(self, target, stream):
        self.case = stream.case

    def on_frame(self, sample, target):
        i = sample.frame_index
        if target.id == "pan" and (i == 5 or (i == 14 and self.case != "b")):
            return {"alert": "boiling", "frame": i}
        if target.id == "bell" and i == 6:
            return [{"alert": "ring"}, {"alert": "ring", "again": True}]
        if i == 9:
            return {"alert": "boiling" if target.id == "pan" else "ring"}
        return None

def create_evaluator(config):
    return Streamer()
"""


def timeless(value: Any) -> Any:
    if isinstance(value, dict):
        if "p50_s" in value and "count" in value:
            return {"count": value.get("count")}
        return {k: timeless(v) for k, v in value.items()
                if not re.search("duration|throughput|average_evaluation|checkpoint", k)}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def streams_eval(tmp_path: Path, cases: tuple[str, ...] = ("a", "b")) -> Path:
    return make_eval(tmp_path, {name: CASE.format(every="0.2" if name == "a" else "0.3") for name in cases},
                     adapter=ADAPTER)


@pytest.mark.parametrize(("cases", "total", "options"), [
    (("a", "b"), 2, ()),  # whole cases
    (("a",), 3, ()),  # fewer cases than shards: streams go whole, samples in slices
    (("a", "b"), 5, ("--repeat", "2", "--min-recall", "0.9", "--max-false-alarms-per-min", "60")),
])
def test_shards_never_split_a_stream_and_merge_to_the_unsharded_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cases: tuple[str, ...], total: int,
        options: tuple[str, ...]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    eval_dir = streams_eval(tmp_path, cases)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", tmp_path / "whole.json",
                              "--junit-xml", tmp_path / "whole.xml", *options)
    whole = read_json(tmp_path / "whole.json")
    assert len(whole["streams"]) == 2 * len(cases) * (2 if "--repeat" in options else 1)
    shards = []
    seen: list[tuple[str, str, int]] = []
    for index in range(1, total + 1):
        path = tmp_path / f"shard-{index}.json"
        shard_code, _o, shard_err = run_cli("run", "--eval-dir", eval_dir, "--shard", f"{index}/{total}",
                                            "--output-json", path, *options)
        assert shard_code == 0, shard_err
        report = read_json(path)
        seen += [(s["case"], s["target"], s["trial"]) for s in report.get("streams", [])]
        shards.append(path)
    # Every stream ran whole in exactly one shard.
    assert sorted(seen) == sorted((s["case"], s["target"], s["trial"]) for s in whole["streams"])
    merged_code, out, merge_err = run_cli("merge-reports", *shards, "--output-json", tmp_path / "merged.json",
                                          "--junit-xml", tmp_path / "merged.xml")
    assert merged_code == code, merge_err
    merged = read_json(tmp_path / "merged.json")
    assert timeless(merged) == timeless(whole)
    assert merged["streams"] == whole["streams"]
    assert [t["gates"] for t in merged["trials"]] == [t["gates"] for t in whole["trials"]]
    assert "Streams" in out
    if "--min-recall" in options:
        names = {g["name"]: g["passed"] for g in merged["trials"][0]["gates"]}
        assert names["pan_min_recall"] is False and names["bell_min_recall"] is True
    junit = (tmp_path / "merged.xml").read_text()
    assert junit.count("pan event @ ") == (tmp_path / "whole.xml").read_text().count("pan event @ ") > 0


def test_merge_refuses_a_stream_reported_twice_or_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    eval_dir = streams_eval(tmp_path)
    paths = []
    for index in (1, 2):
        path = tmp_path / f"shard-{index}.json"
        assert run_cli("run", "--eval-dir", eval_dir, "--shard", f"{index}/2", "--output-json", path)[0] == 0
        paths.append(path)
    first, second = read_json(paths[0]), read_json(paths[1])
    second["streams"] = second["streams"] + first["streams"][:1]
    (tmp_path / "twice.json").write_text(json.dumps(second))
    code, _out, err = run_cli("merge-reports", paths[0], tmp_path / "twice.json")
    assert code == 2 and "is reported by more than one shard" in err, err
    second = read_json(paths[1])
    lost = second["streams"].pop()
    (tmp_path / "lost.json").write_text(json.dumps(second))
    code, _out, err = run_cli("merge-reports", paths[0], tmp_path / "lost.json")
    assert code == 2 and f"no shard reports stream {lost['case']} / {lost['target']}" in err, err


def test_streams_read_back_from_a_report_are_the_ones_written(tmp_path: Path) -> None:
    eval_dir = streams_eval(tmp_path)
    report = tmp_path / "r.json"
    run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--repeat", "2")
    data = load_report_file(report)
    run = run_from_reports([(report, data)])
    assert [s.to_json() for t in run.trials for s in t.streams] == data["streams"]
    # Latencies come back exact (1/5 s: two frames at 10 fps), not as the float's binary value.
    pan = run.trials[0].streams[0]
    assert pan.target == "pan" and [e.latency for e in pan.events] == [pytest.approx(0.2)] * 2
    assert str(pan.events[0].latency) == "1/5"
    code, _out, err = run_cli("report", report, "--html", tmp_path / "r.html")
    assert code == 0, err


@pytest.mark.parametrize(("damage", "where"), [
    (lambda s: s[1]["events"][0].__setitem__("at", "soon"), "streams[1].events[0].at"),
    (lambda s: s[0]["metrics"].pop("detected"), "streams[0].metrics"),
    (lambda s: s[0]["repeats"].append({"time_s": 1}), "streams[0].repeats[0]"),
    (lambda s: s[2]["metrics"].__setitem__("events", 7), "streams[2].metrics"),
])
def test_damaged_streams_stop_report_and_merge_naming_file_and_path(tmp_path: Path, damage: Any,
                                                                    where: str) -> None:
    eval_dir = streams_eval(tmp_path)
    report = tmp_path / "r.json"
    run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    data = read_json(report)
    damage(data["streams"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    for argv in (("report", bad, "--html", tmp_path / "x.html"), ("merge-reports", bad),
                 ("compare", report, bad)):
        code, out, err = run_cli(*argv)
        assert code == 2, (argv, out, err)
        assert str(bad) in err and where in err, (argv, err)
        assert "Traceback" not in err
    assert not (tmp_path / "x.html").exists()


FLAKY = """
TRIALS = []

class Streamer:
    def __init__(self):
        TRIALS.append(1)
        self.trial = len(TRIALS)

    def evaluate(self, sample, target):
        return {"ok": True}

    def on_frame(self, sample, target):
        i = sample.frame_index
        # Onset 0.3 s: every trial; onset 1.2 s: trials 1 and 3 only; bell: never.
        if target.id == "pan" and (i == 5 or (i == 14 and self.trial % 2 == 1)):
            return {"alert": "boiling"}
        return None

def create_evaluator(config):
    return Streamer()
"""


def test_repeat_gives_per_event_detection_rates_and_flags_flaky_events(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"a": CASE.format(every="0.2")}, adapter=FLAKY)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--repeat", "3")
    assert code == 0, err
    stability = read_json(report)["stream_stability"]
    assert stability == [
        {"case": "a", "target": "pan", "index": 0, "at": 0.3, "detected_trials": 3, "trials": 3,
         "detection_rate": 1.0, "flaky": False},
        {"case": "a", "target": "pan", "index": 1, "at": 1.2, "detected_trials": 2, "trials": 3,
         "detection_rate": 2 / 3, "flaky": True},
        {"case": "a", "target": "bell", "index": 0, "at": 0.5, "detected_trials": 0, "trials": 3,
         "detection_rate": 0.0, "flaky": False}]
    section = out[out.index("Unstable and missed events"):]
    section = section[:section.index("\n\n")]  # the table alone, not the run's duration after it
    assert "1.2s" in section and "2/3" in section and "flaky" in section
    assert "missed every trial" in section and "0.3s" not in section
    # One trial: no stability block, the report keeps its keys.
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert "stream_stability" not in read_json(report) and "Unstable and missed events" not in out
