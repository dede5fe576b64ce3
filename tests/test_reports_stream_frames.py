"""Stream frames for the HTML report: which frames the engine hands over, what the keeper keeps, and the page data.

(glasskit_eval.reports.stream_frames, reports.html_streams, and the engine's side of the hook:
evaluation.streams.onset_frames, evaluation.streamscore.false_alarm_at.)
"""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

from framecode import draw_frame, read_frame_index
from htmlkit import page_data, summary_of, thumbnail_images
from test_evaluation_streamscore import emit, event

from glasskit_eval.evaluation.streams import onset_frames
from glasskit_eval.evaluation.streamscore import false_alarm_at, score_stream
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
    key = ("c", "pan", 1)
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
    key = ("c", "pan", 1)
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
    key = ("c", "pan", 1)
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


def test_a_page_from_json_alone_lists_misses_without_frames_and_counts_alarms() -> None:
    stream = _stream([event(0, 10)], [emit(3), emit(4)])
    page = render_html(_summary(stream))
    (data,) = page_data(page)["streams"]
    assert [m[1:3] for m in data["misses"]] == [[None, None]] and data["alarms"] == []
    assert page_data(page)["thumbs"] == []


def test_no_stream_section_without_streams() -> None:
    page = render_html(summary_of([]))
    assert 'id="streams"' not in page and page_data(page)["streams"] == []
