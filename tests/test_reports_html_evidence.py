"""The HTML report leads with the evidence: failures after the gates, full frames, anchors, one time format."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from htmlkit import page_data, result, summary_of

from glasskit_eval.reports.html import HtmlOptions, anchors, render_html, sample_anchor
from glasskit_eval.reports.publish import shown_eval_dir
from glasskit_eval.reports.thumbnails import ThumbnailStore, data_uri_size
from glasskit_eval.results import Gate, Status


def _sections(page: str) -> list[str]:
    import re

    return re.findall(r'<section id="([a-z]+)"', page)


def test_failures_come_right_after_the_gates_and_one_row_tables_fold() -> None:
    results = [result(index=0), result(index=1, t=1.0, status=Status.FAILED, observed="open")]
    page = render_html(summary_of(results, gates=(Gate("max_failures", False, "1 failure > 0"),)))
    order = _sections(page)
    assert order[:3] == ["gates", "failures", "trials"]
    assert order.index("samples") > order.index("cases") > order.index("failures")
    # One trial, one target, one case: each folded into a closed <details>; gates never fold.
    for name in ("trials", "targets", "cases"):
        assert f'<section id="{name}" class="folded"><details><summary>' in page
    assert '<section id="gates"><h2>' in page
    # Every table scrolls in its own box.
    assert page.count('<div class="scroll"><table') == page.count("<table")
    assert '<section id="failures">' not in render_html(summary_of([result()]))


def test_anchors_are_stable_escaped_and_point_at_the_failing_attempt() -> None:
    assert sample_anchor("front-door", "open", 3) == "sample-front-door-open-3"
    assert sample_anchor("caf\u00e9 <x>", "a b", 0) == "sample-caf~c3~a9~20~3cx~3e-a~20b-0"
    t1 = [result(index=0), result(index=1, t=1.0)]
    t2 = [result(index=0), result(index=1, t=1.0, status=Status.FAILED)]
    table = anchors(summary_of(t1, t2))
    assert table == {"sample-doors-door-0": 0, "sample-doors-door-1": 3}  # trial 2's failing attempt
    # Names whose dashes would collide: the second spells its dashes.
    clash = anchors(summary_of([result(case="a-b", target="c"), result(case="a", target="b-c")]))
    assert set(clash) == {"sample-a-b-c-0", "sample-a-b~2dc-0"}


def test_full_frames_share_the_budget_after_every_thumbnail() -> None:
    thumb = b"\xff\xd8" + bytes(1000) + b"\xff\xd9"
    full = b"\xff\xd8" + bytes(30000) + b"\xff\xd9"
    failures = [result(index=i, t=i / 10, frame=i, status=Status.FAILED, observed={"state": "open", "score": i},
                       artifact=f"/runs/f{i}.jpg") for i in range(3)]
    keys = [("doors", i) for i in range(3)]
    budget = 3 * data_uri_size(thumb) + data_uri_size(full) + 10
    data = page_data(render_html(summary_of(failures), HtmlOptions(
        thumbnails=dict.fromkeys(keys, thumb), frames=dict.fromkeys(keys, full), budget_bytes=budget)))
    assert len(data["thumbs"]) == 3 and len(data["frames"]) == 1
    fulls = [row[12] for row in data["rows"]]
    assert fulls[0] == 0 and all(isinstance(f, str) and f.endswith(f"f{i}.jpg") for i, f in enumerate(fulls) if i)
    # The whole observation, not only the compared value.
    assert '"state": "open"' in data["rows"][0][13] and '"score": 0' in data["rows"][0][13]


def test_the_store_keeps_frames_at_full_resolution(tmp_path: Path) -> None:
    import io

    from framecode import draw_frame
    from PIL import Image

    store = ThumbnailStore()
    store.keep(result(status=Status.FAILED, frame=4), draw_frame(4, 1280, 720))
    store.keep(result(status=Status.FAILED, frame=5, t=0.6), draw_frame(5, 128, 72))
    with Image.open(io.BytesIO(store.frames[("doors", 4)])) as image:
        assert image.size == (1280, 720)
    with Image.open(io.BytesIO(store[("doors", 4)])) as image:
        assert image.size == (320, 180)
    # A frame no larger than a thumbnail is its own full frame.
    assert store.frames[("doors", 5)] is store[("doors", 5)]


def test_review_commands_and_header_use_the_eval_dir_as_given() -> None:
    failures = [result(status=Status.FAILED)]
    page = render_html(summary_of(failures, eval_dir="/home/runner/work/r/r/eval"), HtmlOptions(eval_dir="eval"))
    assert "/home/runner" not in page
    assert page_data(page)["rows"][0][11].startswith("python -m glasskit_eval review --eval-dir eval --case")


def test_shown_eval_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub" / "eval").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "sub")
    assert shown_eval_dir(str(tmp_path / "sub" / "eval"), "./my eval") == "./my eval"
    assert shown_eval_dir(str(tmp_path / "sub" / "eval")) == "eval"
    assert shown_eval_dir(str(tmp_path / "sub")) == os.curdir
    assert shown_eval_dir("/nonexistent/runner/work/evals") == "evals"
    assert shown_eval_dir(str(tmp_path)) == str(tmp_path)  # this machine's, outside the current directory


def test_one_time_format() -> None:
    import re

    from glasskit_eval.reports.html_text import clip_time

    assert [clip_time(t) for t in (0.0, 0.5, 1.25, 12.3456, 100.0)] == ["0 s", "0.5 s", "1.25 s", "12.346 s", "100 s"]
    t1 = [result(index=0, t=1.25, status=Status.FAILED)]
    t2 = [result(index=0, t=1.25)]
    baseline = {"path": "b.json", "changes": [{"kind": "fail_to_pass", "case": "doors", "target": "door",
                                                "timestamp_s": 0.5}]}
    page = render_html(summary_of(t1, t2), HtmlOptions(baseline=baseline))
    assert "<td>1.25 s</td>" in page and "<td>0.5 s</td>" in page
    assert not re.search(r"\d+(\.\d+)?s<", page)  # no "0.5s" without its space
