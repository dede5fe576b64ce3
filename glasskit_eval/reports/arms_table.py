"""The console's side-by-side table of a run's arms (at most 80 columns), rendered from an ArmsReport."""

from __future__ import annotations

from typing import TextIO

from ..arms.compare import ArmComparison, ArmsReport
from ..statistics.paired import NOISE_FROM_REPEATS
from ..support.timevalues import format_duration
from .tables import WIDTH, ms, pct

#: The table never gets wider than the console's other tables.
MAX_WIDTH = WIDTH
#: Arm names are cut to this, or to what the other columns leave of :data:`MAX_WIDTH`.
_NAME = 14
#: Flips listed under the table per arm, at most.
FLIP_LINES = 5


def _span(low: float, high: float, signed: bool = False) -> str:
    if signed:
        # The high end's sign only when negative: ``-29.9..29.9`` fits the column ``+`` would not.
        return f"{low * 100:+.1f}..{high * 100:.1f}"
    return f"{low * 100:.1f}-{high * 100:.1f}"


def _name(text: str, width: int = _NAME) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def table_lines(report: ArmsReport) -> list[str]:
    """The header line, one row per arm (control first), the Pareto front, then the flips against the control.

    Within :data:`MAX_WIDTH`: latency is the p95 the Pareto front weighs (p50 is in the JSON and
    HTML reports), and the front is a line under the table rather than a column.
    """
    level = next((s.interval.level for s in report.summaries.values() if s.interval is not None), 0.95)
    ci = f"{level * 100:g}% CI"
    cost = any(s.counts.cost is not None for s in report.summaries.values())
    headers = ["Arm", "Pass", ci, "Δ pts", ci, "p(Holm)", "Flips", "p95"]
    widths = [_NAME, 6, 11, 6, 12, 7, 5, 7]
    if cost:
        headers.append("Cost")
        widths.append(7)
    widths[0] = max(8, min(_NAME, MAX_WIDTH - sum(widths[1:]) - (len(widths) - 1)))
    rows = []
    for name in report.names:
        s = report.summaries[name]
        latency = s.counts.latency
        cells = [_name(name, widths[0]), pct(s.pass_rate),
                 _span(s.interval.low, s.interval.high) if s.interval else "-"]
        comparison = report.overall(name)
        cells += _comparison_cells(comparison) if name != report.control else ["ctrl", "", "", ""]
        cells.append(_seconds(latency.p95 if latency else None))
        if cost:
            cells.append(_cost(s.counts.cost))
        rows.append(cells)

    def line(cells: list[str]) -> str:
        return " ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(headers), *(line(r) for r in rows)]
    weighed = "pass rate, p95 latency" + (", cost" if cost else "")
    front = [n for n in report.names if n in report.pareto]
    if front:
        out.append(f"Pareto front ({weighed}): {', '.join(front)}")
    for name in report.names:
        comparison = report.overall(name)
        if comparison is None or not comparison.flips:
            continue
        out.append(f"Flips {report.control} -> {_name(name)} ({len(comparison.flips)}):")
        for flip in comparison.flips[:FLIP_LINES]:
            out.append(f"  {flip.case}/{flip.target} at {flip.timestamp_s:g}s: {flip.control_status.value} -> "
                       f"{flip.arm_status.value}" + (f" (trial {flip.trial})" if report.repeat > 1 else ""))
        if len(comparison.flips) > FLIP_LINES:
            out.append(f"  ... and {len(comparison.flips) - FLIP_LINES} more (JSON: arm_comparisons)")
    return [text if len(text) <= MAX_WIDTH else text[:MAX_WIDTH - 1] + "…" for text in out]


def _comparison_cells(comparison: ArmComparison | None) -> list[str]:
    test = comparison.test if comparison is not None else None
    if comparison is None or test is None:
        return ["-", "-", "-", str(len(comparison.flips)) if comparison is not None else "-"]
    mark = "*" if test.significant else ""
    return [f"{test.delta_pass_rate * 100:+.1f}", _span(test.low, test.high, signed=True),
            f"{test.p_value:.3g}{mark}", str(len(comparison.flips))]


def _delta(value: float | None, scale: float = 1.0, unit: str = "") -> str:
    return "-" if value is None else f"{value * scale:+.1f}{unit}"


def stream_lines(report: ArmsReport) -> list[str]:
    """Each arm against the control per stream target: recall, false alarms/min, latency p95 (empty without streams).

    One block per stream target, its name on a line of its own, so the rows fit :data:`MAX_WIDTH`
    whatever the case and target are called. The latency and its change are both in whole
    milliseconds, as the console's streams table shows latencies (``+10000ms`` still fits).
    """
    if not report.streams:
        return []
    headers = ["Arm", "Recall", "Δ pts", "FA/min", "Δ", "Lat p95", "Δ", "Only ctrl/arm", "p"]
    widths = [_NAME, 6, 6, 6, 6, 7, 8, 13, 6]

    def line(cells: list[str]) -> str:
        return " ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(headers)]
    shown: str | None = None
    order = {key: i for i, key in reversed(list(enumerate((c.case, c.target) for c in report.streams)))}
    for c in sorted(report.streams, key=lambda c: order[(c.case, c.target)]):
        stream = f"{c.case}/{c.target}"
        if stream != shown:
            out.append(_name(stream, MAX_WIDTH))
            shown = stream
        mine = c.arm_figures
        recall, per_min, p95 = mine.recall, mine.false_alarms_per_min, mine.latency_p95
        out.append(line(["  " + _name(c.arm, widths[0] - 2),
                         pct(None if recall is None else float(recall)), _delta(c.delta_recall, 100),
                         "-" if per_min is None else f"{float(per_min):.2f}", _delta(c.delta_false_alarms_per_min),
                         ms(p95), ms(c.delta_latency_p95_s, "+"),
                         f"{c.control_only}/{c.arm_only}", f"{c.p_value:.3g}"]))
    return out


def print_arms(report: ArmsReport, out: TextIO) -> None:
    # The default (noise from the differences) goes unsaid, so a run without repeats reads as before.
    paired = "paired, noise from the repeats" if report.noise_source == NOISE_FROM_REPEATS else "paired"
    print(f"\nArms (same frames; each compared with {report.control}, {paired}; * significant):", file=out)
    for text in table_lines(report):
        print(text, file=out)
    streams = stream_lines(report)
    if streams:
        print(f"\nStreams by arm (same events; each compared with {report.control}, paired):", file=out)
        for text in streams:
            print(text, file=out)
