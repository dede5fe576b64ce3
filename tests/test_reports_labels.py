"""The label check as the reporters render it: console section, JSON blocks, HTML section (escaped)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from glasskit_eval.labels.consensus import check_labels
from glasskit_eval.reports.labels import (
    CONSOLE_ROWS,
    label_lines,
    labels_json,
    labels_section,
    print_labels,
    review_suspects_command,
)
from glasskit_eval.reports.thumbnails import pixel_key
from glasskit_eval.results import SampleResult, Status


def vote(index: int, observed: object, expected: object, frame: int | None = None) -> SampleResult:
    return SampleResult(case="walk", target="door", target_label=None, sample_index=index, timestamp_s=index / 2,
                        source="at", status=Status.PASSED if observed == expected else Status.FAILED,
                        expected=expected, field=None, compare_mode=None, reason="", observed=observed,
                        observed_value=observed, frame_index=frame)


def many_suspects(count: int) -> list[SampleResult]:
    return [vote(i, "open", "shut", frame=i) for i in range(count) for _ in range(3)]


def test_console_lists_the_strongest_ten_and_the_review_command() -> None:
    check = check_labels(many_suspects(12))
    lines = label_lines(check, "python -m glasskit_eval review --report r.json --suspects")
    assert lines[0] == "Labels to check: 12 suspect, 0 ambiguous of 12 samples with 2+ votes"
    rows = [line for line in lines if line.startswith("walk")]
    assert len(rows) == CONSOLE_ROWS
    assert rows[0].split() == ["walk", "door", "0s", '"shut"', '"open"', "3/3"]
    assert lines[-2] == "... and 2 more (JSON report: label_suspects)"
    assert lines[-1] == "Review them: python -m glasskit_eval review --report r.json --suspects"
    without = label_lines(check, None)
    assert without[-1].startswith("Write the JSON report (--output-json)")


def test_nothing_claimed_and_nothing_found_say_so() -> None:
    out = io.StringIO()
    print_labels(check_labels([vote(0, "open", "shut")]), out, None)
    assert "one vote per sample: nothing is claimed" in out.getvalue()
    lines = label_lines(check_labels([vote(0, "open", "open"), vote(0, "open", "open")]), None)
    assert lines[1] == "  No label is contradicted by a consensus of the votes."
    out = io.StringIO()
    print_labels(None, out, None)
    assert out.getvalue() == "" and labels_json(None) == {}


def test_json_blocks_list_the_same_suspects_in_order() -> None:
    check = check_labels(many_suspects(3))
    blocks = labels_json(check)
    assert set(blocks) == {"label_check", "label_suspects", "label_ambiguous"}
    assert [s["at"] for s in blocks["label_suspects"]] == [0.0, 0.5, 1.0]
    assert blocks["label_check"]["suspects"] == 3 and blocks["label_check"]["quorum"] == 2 / 3


def test_html_escapes_adapter_values_and_shows_the_kept_frame() -> None:
    hostile = "<script>alert(1)</script>"
    check = check_labels([vote(0, hostile, "shut", frame=4)] * 3)
    jpeg = b"\xff\xd8fake"
    page = labels_section(check, {pixel_key("walk", 4): jpeg}, "python -m glasskit_eval review --report 'a b.json' --suspects")
    assert hostile not in page and "&lt;script&gt;" in page
    assert 'src="data:image/jpeg;base64,' in page and "(frame 4)" in page
    assert "review --report &#x27;a b.json&#x27; --suspects" in page
    assert labels_section(check, {}, None).count("no frame kept") == 1


def test_review_command_is_runnable_from_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert review_suspects_command(str(tmp_path / "eval"), str(tmp_path / "out" / "r.json")) == (
        "python -m glasskit_eval review --report out/r.json --suspects")
    assert review_suspects_command(str(tmp_path / "my evals"), str(tmp_path / "r.json")) == (
        "python -m glasskit_eval review --eval-dir 'my evals' --report r.json --suspects")
    assert review_suspects_command("eval", None) is None
