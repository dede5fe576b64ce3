"""Call order (declaration by default, ``--order time``) and the frames that serve it, on real videos."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import TESTS, VIDEOS, load_case, make_eval, read_json, run_cli
from framecode import read_frame_index

from glasskit_eval.evaluation._framestore import FrameStore
from glasskit_eval.evaluation._ordering import (
    KEEP_READ_COST,
    KEEP_WRITE_COST,
    _Costs,
    assign_passes,
    declaration_order_items,
    time_order_items,
)
from glasskit_eval.plan.schedule import expand_case
from glasskit_eval.video.frames import decode_at
from glasskit_eval.video.frametable import frame_table

pytestmark = pytest.mark.frames

#: Records when each call starts and ends, and which frame it got (from the pixels).
RECORDER = f"""
import asyncio, json, os, sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index
HERE = os.path.dirname(os.path.abspath(__file__))

def log(event):
    with open(os.path.join(HERE, "events.jsonl"), "a") as handle:
        handle.write(json.dumps(event) + "\\n")

def create_evaluator(config):
    return Recorder()

class Recorder:
    async def evaluate(self, sample, target):
        log(["start", target.id, sample.timestamp_s])
        index = read_frame_index(sample.image)
        await asyncio.sleep(0.01)
        log(["end", target.id, sample.timestamp_s])
        return index
"""

TWO_TARGETS = """
video: cfr_h264.mp4
targets:
  t1:
    samples:
    - at: [0.5, 1.5]
      expect: 0
  t2:
    samples:
    - at: [0.5, 1.5]
      expect: 0
"""


def events(eval_dir: Path) -> list[tuple[str, str, float]]:
    path = eval_dir / "events.jsonl"
    lines = path.read_text().splitlines()
    path.unlink()
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


def starts(log: list[tuple[str, str, float]]) -> list[tuple[str, float]]:
    return [(target, t) for kind, target, t in log if kind == "start"]


def observed(report: Path) -> dict[tuple[str, float], int]:
    return {(r["target"], r["timestamp_s"]): r["observed"] for r in read_json(report)["trials"][0]["results"]}


def test_targets_are_called_one_after_the_other_in_declaration_order(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": TWO_TARGETS}, RECORDER)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert code == 0, out + err
    assert starts(events(eval_dir)) == [("t1", 0.5), ("t1", 1.5), ("t2", 0.5), ("t2", 1.5)]
    # The exact frames, whichever decode served them (10 fps: frame 5 and frame 15).
    assert observed(report) == {("t1", 0.5): 5, ("t1", 1.5): 15, ("t2", 0.5): 5, ("t2", 1.5): 15}

    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--order", "time", "--output-json", report)
    assert code == 0, out + err
    assert starts(events(eval_dir)) == [("t1", 0.5), ("t2", 0.5), ("t1", 1.5), ("t2", 1.5)]
    assert observed(report) == {("t1", 0.5): 5, ("t1", 1.5): 15, ("t2", 0.5): 5, ("t2", 1.5): 15}


def test_concurrency_bounds_the_current_target_and_the_next_waits_for_it(tmp_path: Path) -> None:
    case = ("video: cfr_h264.mp4\ntargets:\n  first:\n    samples:\n    - range: [0, 2]\n      every_s: 0.2\n"
            "      expect: 0\n  second:\n    samples:\n    - at: 1.9\n      expect: 0\n    - at: 0.1\n      expect: 0\n"
            "    - at: 1.0\n      expect: 0\n")
    eval_dir = make_eval(tmp_path, {"c": case}, RECORDER)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--concurrency", "3", "--output-json", report)
    assert code == 0, out + err
    log = events(eval_dir)
    in_flight, most = 0, 0
    for kind, _target, _t in log:
        in_flight += 1 if kind == "start" else -1
        most = max(most, in_flight)
    assert most <= 3
    first_end = max(i for i, (kind, target, _) in enumerate(log) if kind == "end" and target == "first")
    second_start = min(i for i, (kind, target, _) in enumerate(log) if kind == "start" and target == "second")
    assert first_end < second_start  # "second" started only after every "first" call had finished
    # Samples start in declaration order (block by block), even when it is not time order.
    assert [t for target, t in starts(log) if target == "second"] == [1.9, 0.1, 1.0]
    got = observed(report)
    assert [got[("second", t)] for t in (1.9, 0.1, 1.0)] == [19, 1, 10]
    assert [got[("first", round(0.2 * i, 1))] for i in range(10)] == list(range(0, 20, 2))


def samples_of(tmp_path: Path, text: str) -> list:  # type: ignore[type-arg]
    path = tmp_path / "case.yaml"
    path.write_text(text)
    (tmp_path / "cfr_h264.mp4").symlink_to(VIDEOS / "cfr_h264.mp4")
    case, problems = load_case(path)
    assert case is not None and not problems
    return expand_case(case)


MIXED = """
video: cfr_h264.mp4
targets:
  a:
    samples:
    - at: 1.5
      expect: 0
    - at: 0.2
      expect: 0
    - range: [0.3, 1.4]
      every_s: 0.5
      expect: 0
  b:
    samples:
    - at: [0.2, 1.9, 0.5]
      expect: 0
  c:
    samples:
    - at: [0.0]
      expect: 0
"""


@pytest.mark.parametrize("budget", [0, 1 << 30])
def test_frames_kept_in_memory_or_spilled_are_the_exact_frames(tmp_path: Path, budget: int) -> None:
    samples = samples_of(tmp_path, MIXED)
    store = FrameStore(memory_budget=budget)
    got = [(s.target.id, s.time, f.index, read_frame_index(f.image), f.image.tobytes())
           for s, f in declaration_order_items(tmp_path / "cfr_h264.mp4", samples, store=store)]
    if budget == 0:
        assert store.spilled_frames > 0  # the file path was really taken
    assert len(store) == 0  # closed: nothing kept, file gone
    assert [(target, t) for target, t, *_ in got] == [(s.target.id, s.time) for s in
                                                      sorted(samples, key=lambda s: s.sample_index)]
    reference = {want: (frame.index, frame.image.tobytes())
                 for want, frame in decode_at(tmp_path / "cfr_h264.mp4", [s.time for s in samples])}
    for _target, t, index, pixels_index, pixels in got:
        assert (index, pixels) == reference[t]
        assert pixels_index == index


def test_time_order_items_interleave_targets_by_time(tmp_path: Path) -> None:
    samples = samples_of(tmp_path, MIXED)
    got = [(s.target.id, s.time) for s, f in time_order_items(tmp_path / "cfr_h264.mp4", samples)]
    assert [t for _, t in got] == sorted(t for _, t in got)
    assert got[:5] == [("c", 0), ("a", Fraction(1, 5)), ("b", Fraction(1, 5)), ("a", Fraction(3, 10)),
                       ("b", Fraction(1, 2))]


def test_the_cost_model_keeps_sparse_frames_and_decodes_dense_ones_again(tmp_path: Path) -> None:
    table = frame_table(VIDEOS / "cfr_h264.mp4")  # 20 frames, one keyframe
    costs = _Costs(table, cores=1)
    samples = samples_of(tmp_path, MIXED)
    by_target = {t: [s for s in samples if s.target.id == t] for t in "abc"}
    # Two of b's three frames were decoded before its turn (a reaches frame 15): keeping them
    # costs less than decoding 20 frames again. c's one frame (0) is cheaper to decode again
    # (one frame) than to keep.
    assert KEEP_WRITE_COST + KEEP_READ_COST > 1
    assert assign_passes([by_target["a"], by_target["b"], by_target["c"]], costs) == [0, 0, 2]
    # Without room for a spill file, every later target that would keep frames decodes again.
    assert assign_passes([by_target["a"], by_target["b"], by_target["c"]], costs, limit=0) == [0, 1, 2]
    # A later target wanting every frame: decoding all 20 again costs 20, keeping the 16 that
    # were decoded before its turn costs more than three times as much.
    (tmp_path / "dense").mkdir()
    every = samples_of(tmp_path / "dense", MIXED.replace("at: [0.2, 1.9, 0.5]", "range: [0, 2]\n      every_s: 0.1"))
    dense_b = [s for s in every if s.target.id == "b"]
    assert len(dense_b) == 20
    assert assign_passes([by_target["a"], dense_b], costs) == [0, 1]


def test_the_same_frames_for_many_targets_are_kept_once(tmp_path: Path) -> None:
    targets = "".join(f"  t{i}:\n    samples:\n    - at: [0.1, 1.1, 1.9]\n      expect: 0\n" for i in range(5))
    samples = samples_of(tmp_path, f"video: cfr_h264.mp4\ntargets:\n{targets}")
    store = FrameStore(memory_budget=0)
    got = [(s.target.id, f.index) for s, f in declaration_order_items(tmp_path / "cfr_h264.mp4", samples,
                                                                        store=store)]
    assert got == [(f"t{i}", index) for i in range(5) for index in (1, 11, 19)]
    # t0's three frames were kept once (a copy went to t0) and read back by t1..t4.
    assert store.spilled_frames == 3


def test_a_pass_of_its_own_and_the_shared_pass_keep_the_same_time_apart(tmp_path: Path) -> None:
    # a needs every frame; b (0.1 then 0.0) is cheaper to decode again, on its own pass,
    # which keeps 0.0 for its second sample while the shared pass keeps 0.0 for d.
    case = ("video: cfr_h264.mp4\ntargets:\n  a:\n    samples:\n    - range: [0, 2]\n      every_s: 0.1\n"
            "      expect: 0\n  b:\n    samples:\n    - at: 0.1\n      expect: 0\n    - at: 0.0\n      expect: 0\n"
            "  d:\n    samples:\n    - at: [0.0, 1.9]\n      expect: 0\n")
    samples = samples_of(tmp_path, case)
    groups = [[s for s in samples if s.target.id == t] for t in "abd"]
    assert assign_passes(groups, _Costs(frame_table(VIDEOS / "cfr_h264.mp4"), cores=1)) == [0, 1, 0]
    store = FrameStore(memory_budget=0)
    got = [(s.target.id, s.time, f.index, read_frame_index(f.image))
           for s, f in declaration_order_items(tmp_path / "cfr_h264.mp4", samples, store=store)]
    assert got[20:] == [("b", Fraction(1, 10), 1, 1), ("b", 0, 0, 0), ("d", 0, 0, 0), ("d", Fraction(19, 10), 19, 19)]


def test_the_cost_model_sends_a_tie_to_the_earlier_frame_for_a_video_without_timestamps() -> None:
    # The cost model once rounded (round(1.5) == 2) where the decode gives the earlier frame.
    from array import array

    from glasskit_eval.video._orientation import UPRIGHT
    from glasskit_eval.video.frametable import FrameTable

    table = FrameTable(path=Path("synthetic.mp4"), codec="h264", format_name="mpegts", width=16, height=16,
                       time_base=Fraction(1, 90000), average_rate=Fraction(10), pts=array("q"), keyframes=(),
                       seek_points=(), orientation=UPRIGHT, has_b_frames=False, packets_without_pts=20,
                       packet_count=20, first_time=Fraction(0), trusted=False, reason="20 packets have no timestamp")
    costs = _Costs(table, cores=1)
    assert [costs.index(Fraction(k, 20)) for k in (1, 3, 5, 7)] == [0, 1, 2, 3]
    assert [round(Fraction(k, 20) * 10) for k in (1, 3, 5, 7)] == [0, 2, 2, 4]
    assert _Costs(None, cores=1).index(Fraction(1, 20)) == 1  # 30 fps: 1.5 frames, the earlier
