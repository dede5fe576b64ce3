"""``run --cache`` with stream targets: a replay stream cached whole, keyed on its frame sequence.

The adapter (in process, and as a command through ``protocol_server``) reads each frame's index from
its pixels and logs every call it gets, so "the cache answered" is checked by an empty log, not by
trusting the counters. Changed windows and quiet spans are checked against a run without the cache.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, VIDEOS, make_eval, read_json, run_cli
from reencode import reencode

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

VIDEO = "bframes_h264.mp4"  # 50 frames at 25 fps, B-frames; the clip ends at 2 s

ADAPTER = f"""
import json, sys
from pathlib import Path
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

LOG = Path(__file__).with_name("calls.log")

def log(*what):
    with LOG.open("a") as handle:
        handle.write(json.dumps(what) + "\\n")

class Streamer:
    adapter_version = "1"

    def __init__(self, config):
        self.fire = config.config["fire"]
        self.count = {{}}

    def start_stream(self, target, stream):
        log("start", target.id)
        self.count[target.id] = 0

    def on_frame(self, sample, target):
        index = read_frame_index(sample.image)
        assert index == sample.frame_index, (index, sample.frame_index)
        log("frame", target.id, index)
        self.count[target.id] += 1
        if index in self.fire[target.id]:
            return {{"alert": "boiling", "frame": index}}
        return None

    def end_stream(self, target):
        log("end", target.id)
        return [{{"alert": "done", "frames": self.count.pop(target.id)}}]

def create_evaluator(config):
    return Streamer(config)
"""

#: pan: frame 12 (0.48 s) detects the first event, 13 repeats it, 5 (0.2 s) is a false alarm in the
#: quiet span and 40 (1.6 s) is outside the quiet span, so not scored (until the windows change).
FIRE = {"pan": [5, 12, 13, 40], "door": [5, 30]}

CASE = """\
video: bframes_h264.mp4
targets:
  pan:
    sample_defaults: {field: alert}
    stream: {window: [0, 0.2]}
    events:
      - at: 0.4
        expect: boiling
      - at: 1.2
        expect: boiling
    quiet: [[0, 0.3]]
  door:
    sample_defaults: {field: alert}
    stream: {every_s: 0.2}
    events:
      - at: 0.2
        expect: boiling
"""


def write_eval(tmp_path: Path, fire: dict[str, list[int]] = FIRE) -> Path:
    eval_dir = make_eval(tmp_path, {"c": CASE}, adapter=ADAPTER, videos=(VIDEO,))
    (eval_dir / "adapter.yaml").write_text(json.dumps({"fire": fire}))
    return eval_dir


def served(eval_dir: Path) -> str:
    return shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server", f"{eval_dir / 'adapter.py'}:create_evaluator"])


def calls(eval_dir: Path) -> list[list[Any]]:
    """The adapter calls logged since the last look (the log is emptied)."""
    log = eval_dir / "calls.log"
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    log.unlink()
    return lines


def run(eval_dir: Path, tmp_path: Path, name: str, *extra: str | Path) -> dict[str, Any]:
    report = tmp_path / f"{name}.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *extra)
    assert code in (0, 1), err
    data: dict[str, Any] = read_json(report)
    return data


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "v1").glob("*/*.json"))


@pytest.mark.parametrize("kind", ["python", "protocol-server"])
def test_a_second_run_is_answered_by_the_cache_with_identical_streams(tmp_path: Path, kind: str) -> None:
    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    adapter = ["--adapter-command", served(eval_dir)] if kind == "protocol-server" else []
    cold = run(eval_dir, tmp_path, "cold", "--cache", cache, *adapter)
    fed = calls(eval_dir)
    assert sorted(tuple(c) for c in fed if c[0] != "frame") == [("end", "door"), ("end", "pan"),
                                                                ("start", "door"), ("start", "pan")]
    assert sum(1 for c in fed if c[:2] == ["frame", "pan"]) == 50
    assert sum(1 for c in fed if c[:2] == ["frame", "door"]) == 11
    assert cold["observation_cache"]["streams"] == {"hits": 0, "misses": 2, "writes": 2}
    assert len(entries(cache)) == 2

    warm = run(eval_dir, tmp_path, "warm", "--cache", cache, *adapter)
    assert calls(eval_dir) == []  # not even start_stream or end_stream
    assert warm["streams"] == cold["streams"]
    block = warm["observation_cache"]
    assert block["streams"] == {"hits": 2, "misses": 0, "writes": 0}
    assert (block["hits"], block["misses"], block["writes"]) == (2, 0, 0)
    pan = next(s for s in warm["streams"] if s["target"] == "pan")
    assert [e["status"] for e in pan["events"]] == ["detected", "missed"]
    assert [r["value"]["frame"] for r in pan["repeats"]] == [13]
    assert [f["value"]["frame"] for f in pan["false_alarms"]] == [5]
    assert pan["frames_delivered"] == 50 and pan["frames_dropped"] == 0

    # A third run without --cache feeds the adapter again and reports the same.
    plain = run(eval_dir, tmp_path, "plain", *adapter)
    assert len(calls(eval_dir)) == 4 + 50 + 11
    assert plain["streams"] == cold["streams"]


def test_other_adapter_config_or_other_frames_miss(tmp_path: Path) -> None:
    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    first = run(eval_dir, tmp_path, "first", "--cache", cache)
    calls(eval_dir)

    # Another adapter config: both streams miss, and the new answers are reported.
    (eval_dir / "adapter.yaml").write_text(json.dumps({"fire": {**FIRE, "door": [40]}}))
    changed = run(eval_dir, tmp_path, "config", "--cache", cache)
    assert {c[1] for c in calls(eval_dir) if c[0] == "start"} == {"pan", "door"}
    assert changed["observation_cache"]["streams"] == {"hits": 0, "misses": 2, "writes": 2}
    door = next(s for s in changed["streams"] if s["target"] == "door")
    assert door["events"][0]["status"] == "missed"
    (eval_dir / "adapter.yaml").write_text(json.dumps({"fire": FIRE}))
    assert run(eval_dir, tmp_path, "back", "--cache", cache)["streams"] == first["streams"]
    assert calls(eval_dir) == []

    # The same video re-encoded: same frame times, other pixels, so every stream misses.
    video = eval_dir / "cases" / VIDEO
    reencode(VIDEOS / VIDEO, video, crf=35)
    run(eval_dir, tmp_path, "reencoded", "--cache", cache)
    assert {c[1] for c in calls(eval_dir) if c[0] == "start"} == {"pan", "door"}
    run(eval_dir, tmp_path, "again", "--cache", cache)
    assert calls(eval_dir) == []

    # Other frames fed (every_s of one target): only that stream misses.
    case = eval_dir / "cases" / "c.yaml"
    case.write_text(case.read_text().replace("every_s: 0.2", "every_s: 0.4"))
    report = run(eval_dir, tmp_path, "grid", "--cache", cache)
    fed = calls(eval_dir)
    assert {c[1] for c in fed} == {"door"} and sum(1 for c in fed if c[0] == "frame") == 6
    assert report["observation_cache"]["streams"] == {"hits": 1, "misses": 1, "writes": 1}


def test_changed_windows_and_quiet_spans_are_rescored_from_the_cache(tmp_path: Path) -> None:
    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    run(eval_dir, tmp_path, "cold", "--cache", cache)
    calls(eval_dir)
    case = eval_dir / "cases" / "c.yaml"
    # Wider windows and no quiet spans: frame 40's emission, unscored before, now detects the second event,
    # and end_stream's emission at the clip's end becomes a false alarm.
    case.write_text(case.read_text().replace("window: [0, 0.2]", "window: [0, 0.5]")
                    .replace("    quiet: [[0, 0.3]]\n", ""))
    warm = run(eval_dir, tmp_path, "warm", "--cache", cache)
    assert calls(eval_dir) == []
    assert warm["observation_cache"]["streams"]["hits"] == 2
    fresh = run(eval_dir, tmp_path, "fresh")
    assert warm["streams"] == fresh["streams"]
    pan = next(s for s in warm["streams"] if s["target"] == "pan")
    assert [e["status"] for e in pan["events"]] == ["detected", "detected"]
    assert pan["events"][1]["latency_s"] == pytest.approx(0.4)
    assert [f["time_s"] for f in pan["false_alarms"]] == [0.2, 2.0]


def test_paced_streams_are_never_read_from_or_written_to_the_cache(tmp_path: Path) -> None:
    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    paced = run(eval_dir, tmp_path, "paced", "--cache", cache, "--pace", "10")
    assert {c[1] for c in calls(eval_dir) if c[0] == "start"} == {"pan", "door"}
    assert paced["observation_cache"]["streams"] == {"hits": 0, "misses": 0, "writes": 0}
    assert entries(cache) == []

    run(eval_dir, tmp_path, "replay", "--cache", cache)
    calls(eval_dir)
    assert len(entries(cache)) == 2
    again = run(eval_dir, tmp_path, "paced-again", "--cache", cache, "--pace", "10")
    assert {c[1] for c in calls(eval_dir) if c[0] == "start"} == {"pan", "door"}
    assert again["observation_cache"]["streams"] == {"hits": 0, "misses": 0, "writes": 0}
    assert all(s["pace"] == 10.0 for s in again["streams"])


def _damage_garbage(path: Path) -> None:
    path.write_text("{not json")


def _damage_time(path: Path) -> None:
    data = json.loads(path.read_text())
    data["observation"]["emissions"][0]["time"] = "0.48"  # not an exact n/d
    path.write_text(json.dumps(data))


def _damage_count(path: Path) -> None:
    data = json.loads(path.read_text())
    data["observation"]["frames_delivered"] += 1
    path.write_text(json.dumps(data))


def _damage_duplicate_key(path: Path) -> None:
    text = path.read_text()
    path.write_text(text.replace('"frames_dropped": 0', '"frames_dropped": 0, "frames_dropped": 0', 1))


@pytest.mark.parametrize("damage", [_damage_garbage, _damage_time, _damage_count, _damage_duplicate_key])
def test_a_damaged_stream_entry_is_a_miss_and_written_again(tmp_path: Path, damage: Any) -> None:
    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    cold = run(eval_dir, tmp_path, "cold", "--cache", cache)
    calls(eval_dir)
    damaged = next(p for p in entries(cache) if '"frame": 12' in p.read_text())  # pan's entry
    damage(damaged)
    report = run(eval_dir, tmp_path, "damaged", "--cache", cache)
    assert {c[1] for c in calls(eval_dir)} == {"pan"}
    assert report["observation_cache"]["streams"] == {"hits": 1, "misses": 1, "writes": 1}
    assert report["streams"] == cold["streams"]
    json.loads(damaged.read_text())  # whole again
    healed = run(eval_dir, tmp_path, "healed", "--cache", cache)
    assert calls(eval_dir) == []
    assert healed["streams"] == cold["streams"]


def test_cache_modes_and_trials(tmp_path: Path) -> None:
    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    read = run(eval_dir, tmp_path, "read", "--cache", cache, "--cache-mode", "read")
    assert read["observation_cache"]["streams"] == {"hits": 0, "misses": 2, "writes": 0}
    assert entries(cache) == []
    calls(eval_dir)

    # write: nothing looked up (the frames are decoded once, hashed as they are fed), everything stored.
    for name in ("write", "write-again"):
        written = run(eval_dir, tmp_path, name, "--cache", cache, "--cache-mode", "write")
        assert {c[1] for c in calls(eval_dir) if c[0] == "start"} == {"pan", "door"}
        assert written["observation_cache"]["streams"] == {"hits": 0, "misses": 2, "writes": 2}
        assert len(entries(cache)) == 2
    warm = run(eval_dir, tmp_path, "read-warm", "--cache", cache, "--cache-mode", "read")
    assert calls(eval_dir) == [] and warm["streams"] == written["streams"]

    # --repeat: trial 1 shares its entries with runs without it; trial 2 has its own.
    repeated = run(eval_dir, tmp_path, "repeat", "--cache", cache, "--repeat", "2")
    fed = calls(eval_dir)
    assert sum(1 for c in fed if c[0] == "start") == 2
    assert repeated["observation_cache"]["streams"] == {"hits": 2, "misses": 2, "writes": 2}
    assert [s["trial"] for s in repeated["streams"]] == [1, 1, 2, 2]
    run(eval_dir, tmp_path, "repeat-warm", "--cache", cache, "--repeat", "2")
    assert calls(eval_dir) == []


def test_a_command_adapter_without_a_version_is_not_cached(tmp_path: Path) -> None:
    eval_dir = write_eval(tmp_path)
    adapter = eval_dir / "adapter.py"
    adapter.write_text(adapter.read_text().replace('    adapter_version = "1"\n', ""))
    cache = tmp_path / "cache"
    for name in ("first", "second"):
        report = run(eval_dir, tmp_path, name, "--cache", cache, "--adapter-command", served(eval_dir))
        assert {c[1] for c in calls(eval_dir) if c[0] == "start"} == {"pan", "door"}
        assert report["observation_cache"]["disabled"] is not None
    assert entries(cache) == []


def test_the_html_report_of_cached_streams_shows_the_same_frames(tmp_path: Path) -> None:
    from framecode import read_frame_index
    from htmlkit import page_data, thumbnail_images

    eval_dir = write_eval(tmp_path)
    cache = tmp_path / "cache"
    pages, logged = [], []
    for name in ("cold", "warm"):
        page = tmp_path / f"{name}.html"
        run(eval_dir, tmp_path, name, "--cache", cache, "--html", page)
        pages.append(page.read_text())
        logged.append(len(calls(eval_dir)))
    assert logged == [4 + 50 + 11, 0]
    cold, warm = (page_data(text)["streams"] for text in pages)
    assert warm == cold
    pan = next(s for s in warm if s["target"] == "pan")
    images = thumbnail_images(pages[1])
    assert [m[:2] for m in pan["misses"]] == [[1.2, 30]]
    assert [a[:2] for a in pan["alarms"]] == [[0.2, 5]]
    for _time, frame, thumb, _text in pan["misses"] + pan["alarms"]:
        assert read_frame_index(images[thumb].convert("RGB")) == frame


def test_samples_and_streams_of_one_case_share_the_cache_counters(tmp_path: Path) -> None:
    eval_dir = write_eval(tmp_path)
    adapter = eval_dir / "adapter.py"
    adapter.write_text(adapter.read_text().replace(
        "    def end_stream(self, target):",
        "    def evaluate(self, sample, target):\n        log(\"evaluate\", target.id, sample.frame_index)\n"
        "        return {\"index\": read_frame_index(sample.image)}\n\n    def end_stream(self, target):"))
    case = eval_dir / "cases" / "c.yaml"
    case.write_text(case.read_text() + "  still:\n    samples:\n      - range: [0, 1]\n        every_s: 0.5\n"
                    "        field: index\n        expect: 0\n")
    cache = tmp_path / "cache"
    cold = run(eval_dir, tmp_path, "cold", "--cache", cache)
    assert sum(1 for c in calls(eval_dir) if c[0] == "evaluate") == 2
    block = cold["observation_cache"]
    assert (block["hits"], block["misses"], block["writes"]) == (0, 4, 4)
    warm = run(eval_dir, tmp_path, "warm", "--cache", cache)
    assert calls(eval_dir) == []
    block = warm["observation_cache"]
    assert (block["hits"], block["misses"], block["writes"]) == (4, 0, 0)
    assert block["streams"] == {"hits": 2, "misses": 0, "writes": 0}
    assert warm["streams"] == cold["streams"]
