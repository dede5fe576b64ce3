"""The console's arms streams table (glasskit_eval.reports.arms_table.stream_lines): each arm's
recall, false alarms and detection latency against the control's, in one unit per figure and
within 80 columns."""

from __future__ import annotations

import io
from fractions import Fraction

from test_arms_streamcompare import stream

from glasskit_eval.arms.compare import compare_arms
from glasskit_eval.reports.arms_table import MAX_WIDTH, print_arms, stream_lines

F = Fraction


def test_latency_and_its_change_are_both_in_milliseconds() -> None:
    streams = [stream("control", [True, True], F(1, 5), 0), stream("late", [True, True], F(3, 5), 1),
               stream("deaf", [False, False], F(0), 0)]
    report = compare_arms([[]], ["control", "late", "deaf"], "control", streams=streams)
    assert stream_lines(report) == [
        "Arm            Recall  Δ pts FA/min      Δ Lat p95        Δ Only ctrl/arm      p",
        "c/pan",
        "  late         100.0%   +0.0   2.00   +2.0   600ms   +400ms           0/0      1",
        "  deaf           0.0% -100.0   0.00   +0.0       -        -           2/0   0.25",
    ]


def test_long_latencies_long_names_and_big_changes_stay_within_80_columns() -> None:
    names = ["control", "a-very-long-arm-name-that-goes-on"]
    streams = [stream("control", [True] * 3, F(1, 25), 0, target="t" * 90),
               stream(names[1], [True] * 3, F(12345, 1000), 0, target="t" * 90)]
    report = compare_arms([[]], names, "control", streams=streams)
    lines = stream_lines(report)
    assert max(len(line) for line in lines) <= MAX_WIDTH == 80
    row = lines[2].split()
    # 12.345 s and its change from 40 ms, both in whole milliseconds, each in its own column.
    assert row[0] == "a-very-long…" and row[5:7] == ["12345ms", "+12305ms"]
    out = io.StringIO()
    print_arms(report, out)
    assert "\nStreams by arm (same events; each compared with control, paired):\n" + "\n".join(lines) in out.getvalue()
