"""Stream frames for the HTML report: which frames the engine hands over, what the keeper keeps, and the page data.

(glasskit_eval.reports.stream_frames, reports.html_streams, and the engine's side of the hook:
evaluation.streams.onset_frames, evaluation._streamscore.false_alarm_at.)
"""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction as F
from pathlib import Path
from typing import Any

from framecode import draw_frame, read_frame_index
from htmlkit import page_data, summary_of, thumbnail_images
from test_evaluation_streamscore import emit, event

from glasskit_eval.evaluation._streamscore import false_alarm_at, score_stream
from glasskit_eval.evaluation.streams import onset_frames
from glasskit_eval.plan.feeds import FeedFrame
from glasskit_eval.reports.html import HtmlOptions, render_html
from glasskit_eval.reports.stream_frames import MAX_FALSE_ALARM_FRAMES, StreamFrames
from glasskit_eval.reports.thumbnails import ThumbnailStore, data_uri_size, make_thumbnail
from glasskit_eval.results import StreamResult, TrialResult
from glasskit_eval.summary import RunResult, RunSummary


def frames(*pairs: tuple[int, str]) -> list[FeedFrame]:
    return [FeedFrame(i, F(t)) for i, t in pairs]


def test_onset_frame_is_the_nearest_fed_frame_ties_to_the_earlier() -> None:
    fed = frames((0, "0"), (5, "1/2"), (10, "1"))
    got = onset_frames(fed, [(0, F("0.25")), (1, F("0.26")), (2, F(-3)), (3, F(9)), (4, F("1/2"))])
    assert got == {0: [0, 2], 5: [1, 4], 10: [3]}
    assert onset_frames([], [(0, F(1))]) == {}


def test_false_alarm_at_agrees_with_the_scorer() -> None:
    events = [event(0, 10, (-1, 2)), event(1, 30, (0, 1))]
    for quiet in (None, ((F(0), F(5)), (F(40), F(50)))):
        times = [F(t, 4) for t in range(0, 240)]
        score = score_stream(events, [emit(t, "x") for t in times], clip_end=F(60), quiet=quiet)
        alarms = {e.time for e in score.false_alarms}
        assert {t for t in times if false_alarm_at(events, quiet, t)} == alarms
        assert F(9) not in alarms and F(12) not in alarms  # window ends are closed


def _image(index: int) -> Any:
    return draw_frame(index, 128, 72)


def _stream(events: list[Any], emissions: list[Any], case: str = "c", target: str = "pan", trial: int = 1) -> StreamResult:
    score = score_stream(events, emissions, clip_end=F(60))
    return StreamResult(case=case, target=target, target_label=None, trial=trial, events=score.events,
                        false_alarms=score.false_alarms, repeats=score.repeats, metrics=score.metrics,
                        frames_delivered=600)


def test_keeper_keeps_missed_onsets_drops_detected_ones_and_caps_false_alarms() -> None:
    store = ThumbnailStore()
    keeper = StreamFrames(store)
    key = ("c", "pan", 1, None)
    events = [event(0, 10), event(1, 20)]
    keeper.onset(key, 0, FeedFrame(100, F(10)), _image(100))
    keeper.onset(key, 1, FeedFrame(200, F(20)), _image(200))
    assert len(store) == 0  # nothing is in the store until the stream is scored
    alarms = [emit(F(30) + F(k, 10), "on") for k in range(MAX_FALSE_ALARM_FRAMES + 5)]
    for k, alarm in enumerate(alarms):
        keeper.false_alarm(key, alarm.time, FeedFrame(300 + k, alarm.time), _image(300 + k))
    keeper.finished(_stream(events, [emit(F(10) + F(1, 2)), *alarms]))
    assert keeper.misses == {key: {1: 200}}
    assert len(keeper.alarms[key]) == MAX_FALSE_ALARM_FRAMES
    assert ("c", 100) not in store and read_frame_index(_decode(store[("c", 200)])) == 200
    assert len(store) == 1 + MAX_FALSE_ALARM_FRAMES


def test_keeper_respects_the_budget_and_shares_a_frame_with_a_failed_sample() -> None:
    one = data_uri_size(make_thumbnail(_image(1)))
    store = ThumbnailStore(budget_bytes=one + one // 2)
    store.add(("c", 7), make_thumbnail(_image(7)))  # a failed sample's frame
    keeper = StreamFrames(store)
    key = ("c", "pan", 1, None)
    keeper.false_alarm(key, F(1), FeedFrame(7, F(1)), _image(7))
    keeper.false_alarm(key, F(2), FeedFrame(8, F(2)), _image(8))
    assert keeper.alarms[key] == {F(1): 7, F(2): 8}
    assert len(store) == 1 and ("c", 8) in store.over_budget


def _decode(jpeg: bytes) -> Any:
    import io

    from PIL import Image

    return Image.open(io.BytesIO(jpeg)).convert("RGB")


def _summary(*streams: StreamResult, repeat: int = 1) -> RunSummary:
    trials = tuple(TrialResult(trial=t, results=(), gates=(), duration_seconds=1.0, timing_mode=None,
                               streams=tuple(s for s in streams if s.trial == t)) for t in range(1, repeat + 1))
    return RunSummary.of(RunResult(eval_dir="/e", cases=("c",), repeat=repeat, trials=trials, gates=(),
                                   duration_seconds=1.0))


def test_page_data_classes_every_emission_and_points_at_the_kept_frames() -> None:
    events = [event(0, 10), event(1, 20, expect="off")]
    stream = _stream(events, [emit(5), emit("10.5"), emit(11), emit(20, "on"), emit(40)])
    store = ThumbnailStore()
    keeper = StreamFrames(store)
    key = ("c", "pan", 1, None)
    keeper.onset(key, 1, FeedFrame(20, F(20)), _image(20))
    keeper.false_alarm(key, F(5), FeedFrame(5, F(5)), _image(5))  # the one at 40 s kept no frame
    keeper.finished(stream)
    page = render_html(_summary(stream), HtmlOptions(thumbnails=store, durations={"c": 60.0},
                                                     stream_misses=keeper.misses, stream_alarms=keeper.alarms))
    (data,) = page_data(page)["streams"]
    assert data["duration"] == 60.0
    assert [w[:4] for w in data["windows"]] == [[10.0, 11.0, 10.0, True], [20.0, 21.0, 20.0, False]]
    assert [e[:2] for e in data["emissions"]] == [[5.0, 2], [10.5, 0], [11.0, 1], [20.0, 1], [40.0, 2]]
    images = thumbnail_images(page)
    (miss,) = data["misses"]
    assert miss[:2] == [20.0, 20] and read_frame_index(images[miss[2]].convert("RGB")) == 20
    (alarm,) = data["alarms"]
    assert alarm[:2] == [5.0, 5] and read_frame_index(images[alarm[2]].convert("RGB")) == 5
    assert 'id="stream-figures"' in page and "1/2" in page


def test_each_arms_stream_keeps_its_own_frames() -> None:
    """Arms' streams of one (case, target, trial) run side by side: each keeps its own misses and false alarms."""
    store = ThumbnailStore()
    keeper = StreamFrames(store)
    events = [event(0, 10)]
    for arm, frame in (("control", 100), ("dim", 100)):
        keeper.onset(("c", "pan", 1, arm), 0, FeedFrame(frame, F(10)), _image(frame))
    keeper.false_alarm(("c", "pan", 1, "dim"), F(3), FeedFrame(3, F(3)), _image(3))
    detected = dataclasses.replace(_stream(events, [emit(F(10) + F(1, 2))]), arm="control")
    missed = dataclasses.replace(_stream(events, [emit(3)]), arm="dim")
    keeper.finished(detected)
    keeper.finished(missed)
    assert keeper.misses == {("c", "pan", 1, "control"): {}, ("c", "pan", 1, "dim"): {0: 100}}
    assert keeper.alarms == {("c", "pan", 1, "dim"): {F(3): 3}}
    page = render_html(_summary(detected, missed), HtmlOptions(thumbnails=store, durations={"c": 60.0},
                                                               stream_misses=keeper.misses,
                                                               stream_alarms=keeper.alarms))
    found = {s["target"]: s for s in page_data(page)["streams"]}
    assert found["pan · control"]["misses"] == [] and found["pan · control"]["alarms"] == []
    assert [m[:2] for m in found["pan · dim"]["misses"]] == [[10.0, 100]]
    assert [a[:2] for a in found["pan · dim"]["alarms"]] == [[3.0, 3]]


def test_a_page_from_json_alone_lists_misses_without_frames_and_counts_alarms() -> None:
    stream = _stream([event(0, 10)], [emit(3), emit(4)])
    page = render_html(_summary(stream))
    (data,) = page_data(page)["streams"]
    assert [m[1:3] for m in data["misses"]] == [[None, None]] and data["alarms"] == []
    assert page_data(page)["thumbs"] == []


def test_no_stream_section_without_streams() -> None:
    page = render_html(summary_of([]))
    assert 'id="streams"' not in page and page_data(page)["streams"] == []


#: Emits on the frames it is told to (by the index in their pixels), whatever the clock.
PACED = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from framecode import read_frame_index

class Emitter:
    def __init__(self, config):
        self.frames = set(config.config["frames"])

    def on_frame(self, sample, target):
        index = read_frame_index(sample.image)
        return {{"alert": "boiling", "frame": index}} if index in self.frames else None

def create_evaluator(config):
    return Emitter(config)
"""


def test_paced_run_keeps_the_answered_frame_of_each_false_alarm(tmp_path: Path) -> None:
    """Paced, an emission is timed when its answer arrives: its frame is the one answered, at or before that time."""
    from evalkit import make_eval, run_cli
    from fixturevideos import MANIFEST

    times = [F(t) for t in MANIFEST["cfr_h264.mp4"]["frame_times"]]
    case = ("video: cfr_h264.mp4\ntargets:\n  pan:\n    sample_defaults: {field: alert}\n"
            "    stream: {window: [0, 0.2]}\n    events:\n      - at: 0.3\n        expect: boiling\n"
            "      - at: 1.0\n        expect: boiling\n")
    eval_dir = make_eval(tmp_path, {"c": case}, adapter=PACED)
    (eval_dir / "adapter.yaml").write_text(json.dumps({"frames": [0, 4, 15]}))
    page = tmp_path / "r.html"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--html", page, "--pace", "4")
    assert code == 0, err
    text = page.read_text()
    (data,) = page_data(text)["streams"]
    images = thumbnail_images(text)
    # The event at 1.0 s is missed whatever the clock: its onset frame (10) is shown. (The one at
    # 0.3 s is detected unless a loaded machine answers frame 4 after its window: not asserted.)
    assert [1.0, 10] in [m[:2] for m in data["misses"]]
    for at, frame, thumb, _text in data["misses"]:
        assert read_frame_index(images[thumb].convert("RGB")) == frame == {0.3: 3, 1.0: 10}[at]
    # Frame 0's answer is always a false alarm (no window before 0.3 s).
    assert 0 in [a[1] for a in data["alarms"]]
    for time, frame, thumb, _text in data["alarms"]:
        assert frame in (0, 4, 15) and float(times[frame]) <= time
        assert read_frame_index(images[thumb].convert("RGB")) == frame
