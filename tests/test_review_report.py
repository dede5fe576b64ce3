"""review/report: run-report markers, and which of them the case file has changed since the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reportkit import report_of, result_json, write_report

from glasskit_eval.cases.model import Case
from glasskit_eval.cases.parse import parse_case
from glasskit_eval.errors import UsageError
from glasskit_eval.review.report import annotate, load_report
from glasskit_eval.yamltext.source import load_yaml_text

CASE = """\
video: clip.mp4
targets:
  door:
    samples:
      - at: [0.5, 1.5]
        expect: closed
      - range: [2.0, 3.0]
        field: state
        expect: open
        compare: {mode: exact}
      - at: 4.0
        expect: x
        ignore: blurry
"""


def case_of(text: str, tmp_path: Path) -> Case:
    doc, problems = load_yaml_text(text, str(tmp_path / "clip.yaml"))
    assert not problems
    case, problems = parse_case(doc, tmp_path / "clip.yaml")
    assert case is not None and not problems
    return case


def result(time: float, status: str = "failed", **extra: Any) -> dict[str, Any]:
    out = {"case": "clip", "target": "door", "timestamp_s": time, "status": status, "reason": "r",
           "expected": "closed", "field": None, "compare_mode": None, "observed": {"state": "ajar"},
           "observed_value": {"state": "ajar"}, "frame_index": 5}
    out.update(extra)
    return out


def test_markers_keep_what_the_page_shows(tmp_path: Path) -> None:
    path = write_report(tmp_path / "results.json",
                        [result_json(0.5), result_json(1.5, case="other", index=1)])
    markers = load_report(path)
    assert set(markers) == {"clip", "other"}
    (marker,) = markers["clip"]
    assert marker == {"trial": 1, "target": "door", "time_s": 0.5, "status": "failed", "reason": "r",
                      "expected": "closed", "field": None, "compare_mode": None,
                      "observed": {"state": "ajar"}, "observed_value": {"state": "ajar"}, "frame_index": 5,
                      "arm": None}


@pytest.mark.parametrize(("text", "needle"), [
    (None, "no such report file"), ("{", "not valid JSON"), ("[]", "not a glasskit_eval run report"),
    ('{"trials": {}}', "lacks `report_type`"),
])
def test_bad_reports_are_usage_errors(tmp_path: Path, text: str | None, needle: str) -> None:
    path = tmp_path / "results.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UsageError, match=needle):
        load_report(path)


def test_a_damaged_result_is_refused_naming_where(tmp_path: Path) -> None:
    """Damage is no longer skipped: the page would show markers of a report that is not what the run wrote."""
    report = report_of([result_json(0.5)])
    report["trials"][0]["results"][0]["timestamp_s"] = "0.5"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(report))
    with pytest.raises(UsageError, match=r"--report .*results\.json: trials\[0\]\.results\[0\]\.timestamp_s: "
                                         "must be a number, not a string"):
        load_report(path)


def test_changed_since_run(tmp_path: Path) -> None:
    case = case_of(CASE, tmp_path)
    markers = [
        {**m, "time_s": m["timestamp_s"]} for m in (
            result(0.5),                                    # same expectation: still applies
            result(1.5, expected="open"),                   # the file now says closed
            result(2.5, expected="open", field="state", compare_mode="exact"),
            result(2.0, expected="open", field=None, compare_mode="exact"),  # field changed
            result(2.0, expected="open", field="state", compare_mode=None),  # mode changed
            result(4.0, status="ignored", expected="x"),    # still ignored
            result(0.5000000001),                           # the same sample, as a float
            result(9.0),                                    # no such sample any more
            {**result(0.5), "target": "light"},             # no such target
        )
    ]
    got = [m["changed"] for m in annotate(markers, case)]
    assert got == [False, True, False, True, True, False, False, True, True]
    newly_ignored = case_of(CASE.replace("expect: closed", "expect: closed\n        ignore: later"), tmp_path)
    assert annotate([markers[0]], newly_ignored)[0]["changed"] is True
    drafted = case_of(CASE.replace("        expect: closed\n", ""), tmp_path)
    assert annotate([markers[0]], drafted)[0]["changed"] is True
    assert annotate([markers[0]], None) == [{**markers[0], "changed": False}]
