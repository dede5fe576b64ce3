"""Human-readable output: progress lines, summary and tables.

Plain text that reads the same in a terminal and a CI log. Colour only marks
statuses, and only on a TTY without ``NO_COLOR``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..plan.planning import CasePlan
from ..results import SampleResult, Status
from ..summary import Counts, RunSummary, StabilityCounts, mean, target_display
from ..support.timevalues import format_time
from .calls import console_lines

_COLOURS = {Status.PASSED: "32", Status.FAILED: "31", Status.ERROR: "35", Status.IGNORED: "33"}


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def seconds(value: float) -> str:
    return f"{value:.1f}s"


def time_label(value: float) -> str:
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
          right: Sequence[bool] | None = None) -> str:
    """A plain aligned table; the first column is left-aligned, numbers right-aligned."""
    align = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def fmt(cells: Sequence[str]) -> str:
        parts = [c.rjust(widths[i]) if align[i] else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(parts).rstrip()

    lines = [title, fmt(headers), "  ".join("-" * w for w in widths)]
    lines.extend(fmt(row) for row in rows)
    return "\n".join(lines)


class ConsoleListener:
    """Prints progress as cases finish (a RunListener)."""

    def __init__(self, out: TextIO | None = None, *, verbose: bool = False) -> None:
        self.out = out or sys.stdout
        self.verbose = verbose
        self.colour = use_colour(self.out)

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def _status(self, status: Status) -> str:
        word = status.value.upper()
        if self.colour:
            return f"\033[{_COLOURS.get(status, '0')}m{word}\033[0m"
        return word

    def trial_started(self, trial: int, total: int) -> None:
        self._print()
        self._print(f"Trial {trial}/{total}")

    def case_started(self, plan: CasePlan, trial: int, total: int) -> None:
        video = plan.video_path.name if plan.video_path.name else plan.case.video.describe()
        self._print(f"Case {plan.case.name} ({len(plan.samples)} samples, video={video})")

    def case_finished(self, plan: CasePlan, results: list[SampleResult], trial: int, total: int) -> None:
        prefix = f"[{trial}/{total}] " if total > 1 else ""
        for target in plan.case.targets:
            mine = [r for r in results if r.target == target.id]
            if not mine:
                continue
            display = f"{target.label} ({target.id})" if target.label else target.id
            counts = Counts.of(mine)
            self._print(f"  target {display}: {len(mine)} samples, {counts.passed} passed, "
                        f"{counts.failed} failed, {counts.errors} errors, {counts.ignored} ignored")
            bad = (Status.FAILED, Status.ERROR)
            shown = [r for r in mine if (r.status in bad if not self.verbose else r.evaluated)]
            shown += [r for r in mine if not r.evaluated]
            for r in shown:
                self._print(self.result_line(r, prefix))

    def result_line(self, r: SampleResult, prefix: str = "") -> str:
        frame = f" frame={r.frame_index}" if r.frame_index is not None else ""
        observed = "" if not r.evaluated else f" observed={compact(r.observed_value)}"
        return (f"    {prefix}{self._status(r.status)} {target_display(r)} @{time_label(r.timestamp_s)}s"
                f"{frame} expected={compact(r.expected)}{observed} reason={r.reason}")


def print_summary(summary: RunSummary, out: TextIO, *, resume_hint: str | None = None) -> None:
    def p(text: str = "") -> None:
        print(text, file=out)

    run = summary.run
    total = summary.total
    many = len(run.trials) > 1
    p()
    p(f"Eval: {run.eval_dir}")
    p(f"Cases: {len(run.cases)}")
    if not many:
        p(f"Samples: {total.evaluated} evaluated, {total.passed} passed, {total.failed} failed, "
          f"{total.errors} errors, {total.ignored} ignored")
        p(f"Pass rate: {pct(total.pass_rate)}")
    else:
        ok = sum(1 for t in run.trials if t.success)
        first = summary.first
        p(f"Trials: {len(run.trials)} total, {ok} passed gates, {len(run.trials) - ok} failed gates")
        p(f"Samples: {first.evaluated} evaluated per trial, {first.ignored} ignored")
        p(f"Attempts: {total.evaluated} evaluated, {total.passed} passed, {total.failed} failed, "
          f"{total.errors} errors")
        rates = summary.trial_rates
        if rates:
            p(f"Trial pass rate (min / mean / max): {pct(min(rates))} / {pct(mean(rates))} / "
              f"{pct(max(rates))}")
        sc = summary.stability_counts()
        p(f"Stability: {sc.consistently_passed} consistently passed, {sc.consistently_failed} consistently "
          f"failed, {sc.flaky} flaky, {sc.with_errors} with errors")
    p(f"Duration: {seconds(run.duration_seconds)}")
    unit = "attempt" if many else "sample"
    if total.average_latency is not None:
        p(f"Avg evaluation latency: {total.average_latency * 1000:.2f}ms/{unit}")
    if run.duration_seconds > 0:
        p(f"Throughput: {total.evaluated / run.duration_seconds:.2f} {unit}s/s")
    for line in console_lines(summary):
        p(line)

    if many:
        rows = [[str(t.trial.trial), pct(t.counts.pass_rate), str(t.counts.passed), str(t.counts.failed),
                 str(t.counts.errors), "passed" if t.trial.success else "failed",
                 seconds(t.trial.duration_seconds)] for t in summary.trials]
        p()
        p(table("By trial", ["Trial", "Pass rate", "Passed", "Failed", "Errors", "Gates", "Duration"], rows))

    failed_gates = summary.failed_gates()
    if failed_gates:
        p()
        if many:
            p(table("Failed gates", ["Scope", "Gate", "Detail"],
                    [[scope, g.name, g.message] for scope, g in failed_gates], [False, False, False]))
        else:
            p(table("Failed gates", ["Gate", "Detail"], [[g.name, g.message] for _s, g in failed_gates],
                    [False, False]))

    p()
    p(_target_table(summary))
    if many:
        unstable = [s for s in summary.stability if s.flaky or s.consistently_failed]
        if unstable:
            rows = []
            for s in unstable:
                letters = "/".join(_LETTERS.get(x, "-") for x in s.statuses)
                finding = "flaky" if s.flaky else "failed every trial"
                if s.has_errors:
                    finding += ", adapter/comparison errors"
                rows.append([s.first.case, target_display(s.first), f"{time_label(s.first.timestamp_s)}s",
                             letters, finding])
            p()
            p(table("Unstable and failing samples", ["Case", "Target", "Time", "Outcomes", "Finding"], rows,
                    [False, False, True, False, False]))
    if resume_hint:
        p()
        p(resume_hint)


_LETTERS = {Status.PASSED: "P", Status.FAILED: "F", Status.ERROR: "E"}


def _target_table(summary: RunSummary) -> str:
    if len(summary.run.trials) <= 1:
        rows = []
        for g in summary.targets:
            c = g.counts
            latency = "-" if c.average_latency is None else f"{c.average_latency * 1000:.2f}ms"
            rows.append([g.display, pct(c.pass_rate), str(c.passed), str(c.failed), str(c.errors),
                         str(c.ignored), latency])
        return table("By target", ["Target", "Pass rate", "Passed", "Failed", "Errors", "Ignored",
                                   "Avg latency"], rows, [False, True, True, True, True, True, True])
    rows = []
    for g in summary.targets:
        known = [x * 100 for x in g.trial_rates]
        span = "-" if not known else f"{min(known):.1f}/{sum(known) / len(known):.1f}/{max(known):.1f}%"
        mine = [s for s in g.stability if s.evaluated]
        s = StabilityCounts.of(mine)
        rows.append([g.display, span, str(len(mine)), str(s.consistently_passed), str(s.consistently_failed),
                     str(s.flaky), str(s.with_errors)])
    return table("By target", ["Target", "Pass min/mean/max", "Samples", "Pass all", "Fail all", "Flaky",
                               "Errors"], rows, [False, True, True, True, True, True, True])


def format_list_samples(eval_dir: str, rows: list[list[str]]) -> str:
    return table(f"Samples: {eval_dir}", ["Case", "Target", "Time", "Expected", "Mode", "Field", "Ignored",
                                          "Source"], rows, [False, False, True, False, False, False, False, False])


def time_cell(value: Any) -> str:
    return f"{format_time(value)}s"
