"""Human-readable output: progress lines, summary and tables.

Plain text that reads the same in a terminal and a CI log. Colour only marks
statuses, and only on a TTY without ``NO_COLOR``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import TextIO

from ..results import SampleResult, Status, StreamResult
from ..statistics.descriptive import mean
from ..summary import CaseHeader, Counts, RunSummary, StabilityCounts, target_display
from ..support.outside import inline, quoted_lines
from ..support.tracebacks import last_frame
from .calls import console_lines, detectable_text, interval_text
from .progress import ProgressDisplay
from .tables import WIDTH, compact, pct, seconds, table, time_label

_COLOURS = {Status.PASSED: "32", Status.FAILED: "31", Status.ERROR: "35", Status.IGNORED: "33",
            Status.NOT_EVALUATED: "2"}


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class ConsoleListener:
    """Prints a run as it goes (a RunListener): case headers, each failure as it is judged, progress.

    Lines go to ``out``; the live progress line (terminals only) goes to ``err``.
    """

    def __init__(self, out: TextIO | None = None, *, verbose: bool = False, err: TextIO | None = None,
                 case_names: Sequence[str] = (), live: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.verbose = verbose
        self.colour = use_colour(self.out)
        self.case_names = list(case_names)
        self.progress = ProgressDisplay(self.out, err or sys.stderr, live=live)

    def _print(self, text: str = "") -> None:
        self.progress.write_above(text)

    def _status(self, status: Status) -> str:
        word = status.value.upper()
        if self.colour:
            return f"\033[{_COLOURS.get(status, '0')}m{word}\033[0m"
        return word

    def trial_started(self, trial: int, total: int) -> None:
        self._print()
        self._print(f"Trial {trial}/{total}")

    def case_started(self, case: CaseHeader, trial: int, total: int) -> None:
        self._print(f"Case {case.name} ({case.samples} samples, video={case.video})")
        number = self.case_names.index(case.name) + 1 if case.name in self.case_names else 1
        self.progress.case_started(case.name, number, max(len(self.case_names), 1), case.samples, trial, total)

    def sample_finished(self, result: SampleResult, trial: int, total: int) -> None:
        """A result as soon as it is judged: failures (every result with --verbose) are printed now."""
        shown = self.verbose or result.status in (Status.FAILED, Status.ERROR, Status.IGNORED)
        if shown:
            prefix = f"[{trial}/{total}] " if total > 1 else ""
            self._print(self.result_line(result, prefix))
            if self.verbose and result.traceback:
                self._print(indent_block(quoted_lines(result.traceback), "      "))
        self.progress.result(result)

    def stream_finished(self, result: StreamResult, trial: int, total: int) -> None:
        m = result.metrics
        prefix = f"[{trial}/{total}] " if total > 1 else ""
        dropped = f" ({result.frames_dropped} dropped)" if result.pace is not None else ""
        stopped = f"; stopped: {inline(result.error)}" if result.error else ""
        arm = f" [{result.arm}]" if result.arm is not None else ""
        self._print(f"  {prefix}stream {result.target}{arm}: {result.frames_delivered} frames{dropped}, "
                    f"{m.detected}/{m.events} events detected, {m.repeats} repeats, {m.false_alarms} false alarms"
                    f"{stopped}")

    def tick(self) -> None:
        self.progress.tick()

    def notice(self, text: str) -> None:
        self._print(f"warning: {text}")

    def case_finished(self, case: CaseHeader, results: list[SampleResult], trial: int, total: int) -> None:
        self.progress.case_finished()
        for target_id, label in case.targets:
            mine = [r for r in results if r.target == target_id]
            if not mine:
                continue
            display = f"{label} ({target_id})" if label else target_id
            counts = Counts.of(mine)
            self._print(f"  target {display}: {len(mine)} samples, {counts.passed} passed, "
                        f"{counts.failed} failed, {counts.errors} errors, {counts.ignored} ignored"
                        + (f", {counts.not_evaluated} not evaluated" if counts.not_evaluated else ""))

    def close(self) -> None:
        """Take the live line away (the run ended, or stopped)."""
        self.progress.clear()

    def result_line(self, r: SampleResult, prefix: str = "") -> str:
        frame = f" frame={r.frame_index}" if r.frame_index is not None else ""
        observed = "" if not r.evaluated else f" observed={inline(compact(r.observed_value))}"
        where = last_frame(r.traceback) if r.traceback else None
        at = f" (at {where})" if where else ""
        arm = f" [{r.arm}]" if r.arm is not None else ""
        return (f"    {prefix}{self._status(r.status)}{arm} {r.case}/{target_display(r)} @{time_label(r.timestamp_s)}s"
                f"{frame} expected={compact(r.expected)}{observed} reason={shown_reason(r)}{inline(at)}")


def indent_block(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def print_summary(summary: RunSummary, out: TextIO, *, resume_hint: str | None = None,
                  report_path: str | None = None, gated_elsewhere: bool = False, fold: bool = False) -> None:
    """The run's summary; ``gated_elsewhere``: a shard, whose gates ``merge-reports`` applies;
    ``fold``: long tables fold into GitHub Actions log groups (their title stays visible)."""
    def p(text: str = "") -> None:
        print(text, file=out)

    def section(text: str) -> None:
        if not fold:
            p(text)
            return
        title, _, rest = text.partition("\n")
        p(f"::group::{title}")
        p(rest)
        p("::endgroup::")

    run = summary.run
    total = summary.total
    many = len(run.trials) > 1
    p()
    p(f"Eval: {run.eval_dir}")
    p(f"Cases: {len(run.cases)}")
    if summary.arm is not None:
        p(f"Arm: {summary.arm} (the control; arms are never pooled: each arm's figures are in the arms table)")
    if not many:
        p(f"Samples: {total.evaluated} evaluated, {total.passed} passed, {total.failed} failed, "
          f"{total.errors} errors, {total.ignored} ignored")
        p(f"Pass rate: {pct(total.pass_rate)}{interval_text(summary.pass_rate_ci)}")
    else:
        ok = sum(1 for t in run.trials if t.success)
        first = summary.first
        p(f"Trials: {len(run.trials)} total, {ok} passed gates, {len(run.trials) - ok} failed gates")
        p(f"Samples: {first.evaluated} evaluated per trial, {first.ignored} ignored")
        p(f"Attempts: {total.evaluated} evaluated, {total.passed} passed, {total.failed} failed, "
          f"{total.errors} errors")
        if summary.pass_rate_ci is not None:
            p(f"Pass rate: {pct(summary.pass_rate_ci.rate)}{interval_text(summary.pass_rate_ci)}, "
              "each sample's pass fraction over the trials")
        rates = summary.trial_rates
        if rates:
            p(f"Trial pass rate (min / mean / max): {pct(min(rates))} / {pct(mean(rates))} / "
              f"{pct(max(rates))}")
        sc = summary.stability_counts()
        p(f"Stability: {sc.consistently_passed} consistently passed, {sc.consistently_failed} consistently "
          f"failed, {sc.flaky} flaky, {sc.with_errors} with errors")
    detectable = detectable_text(summary)
    if detectable is not None:
        p(detectable)
    p(f"Duration: {seconds(run.duration_seconds)}")
    unit = "attempt" if many else "sample"
    if total.average_latency is not None:
        p(f"Avg evaluation latency: {total.average_latency * 1000:.2f}ms/{unit}")
    if run.duration_seconds > 0:
        p(f"Throughput: {total.evaluated / run.duration_seconds:.2f} {unit}s/s")
    for line in console_lines(summary, latency=_latency_says_something(summary)):
        p(line)

    if many:
        rows = [[str(t.trial.trial), pct(t.counts.pass_rate), str(t.counts.passed), str(t.counts.failed),
                 str(t.counts.errors), "passed" if t.trial.success else "failed",
                 seconds(t.trial.duration_seconds)] for t in summary.trials]
        p()
        section(table("By trial", ["Trial", "Pass rate", "Passed", "Failed", "Errors", "Gates", "Duration"], rows,
                      width=WIDTH))

    failed_gates = summary.failed_gates()
    if failed_gates:
        p()
        if many:
            p(table("Failed gates", ["Scope", "Gate", "Detail"],
                    [[scope, g.name, g.message] for scope, g in failed_gates], [False, False, False], width=WIDTH))
        else:
            p(table("Failed gates", ["Gate", "Detail"], [[g.name, g.message] for _s, g in failed_gates],
                    [False, False], width=WIDTH))

    p()
    section(_target_table(summary))
    from .streams import stream_stability_table, stream_table

    for streams in (stream_table(summary), stream_stability_table(summary)):
        if streams is not None:
            p()
            section(streams)
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
            section(table("Unstable and failing samples", ["Case", "Target", "Time", "Outcomes", "Finding"], rows,
                    [False, False, True, False, False], width=WIDTH))
    failures = failure_lines(summary, report_path, gated_elsewhere)
    if failures:
        p()
        section("\n".join(failures))
    if resume_hint:
        p()
        p(resume_hint)


_LETTERS = {Status.PASSED: "P", Status.FAILED: "F", Status.ERROR: "E"}

#: Fewer evaluated samples than this make percentiles noise: the latency block is left out
#: unless a latency gate asks about it.
LATENCY_SAMPLES = 10


def _latency_says_something(summary: RunSummary) -> bool:
    gates = [g.name for g in summary.run.gates] + [g.name for t in summary.run.trials for g in t.gates]
    return summary.total.evaluated >= LATENCY_SAMPLES or any("latency" in g for g in gates)


def print_end(summary: RunSummary, written: Sequence[str], out: TextIO) -> None:
    """What a run wrote, then its verdict: the last lines, after every table and hint."""
    print(file=out)
    for name in written:
        print(f"Wrote {name}", file=out)
    print(verdict_line(summary), file=out)


def verdict_line(summary: RunSummary) -> str:
    """The last line of a run, in pytest's manner: what happened, how long it took, which gates failed."""
    total = summary.total
    parts = [f"{n} {word}" for n, word in ((total.failed, "failed"), (total.errors, "errors"),
                                           (total.passed, "passed"), (total.ignored, "ignored"),
                                           (total.not_evaluated, "not evaluated")) if n]
    counts = ", ".join(parts) or "nothing evaluated"
    failed = sorted({g.name for _scope, g in summary.failed_gates()})
    if failed:
        tail = f"; gates: {', '.join(failed)}"
    elif (total.failed or total.errors) and not summary.correctness_gated:
        tail = "; no gate is set"
    else:
        tail = ""
    word = "PASSED" if summary.success else "FAILED"
    from .early_stop import verdict_tail

    return f"{word}: {counts} in {seconds(summary.run.duration_seconds)}{tail}{verdict_tail(summary)}"

#: Rows of the failure table; the rest are counted and left to the JSON report.
FAILURE_ROWS = 20
#: Widest expected or observed value in the failure table (the whole value is in the JSON report).
_CELL = 16
#: The sample an error's reason names first: the table's other columns already say it.
_ERROR_SUBJECT = re.compile(r"adapter failed for \S+ sample \d+ at \S+s: ")


def _cell(text: str, width: int = _CELL) -> str:
    text = inline(text)
    return text if len(text) <= width else text[:width - 3] + "..."


def shown_reason(r: SampleResult) -> str:
    """The reason as a line or a row shows it: without the case, target and time it sits beside."""
    return inline(_ERROR_SUBJECT.sub("", r.reason, count=1))


def review_command(result: SampleResult, eval_dir: str, report_path: str | None = None) -> str:
    """The ``review`` command that opens ``result``'s frame, runnable from the current directory.

    With the run's JSON report, the review page marks every sample's outcome too.
    """
    import shlex
    from pathlib import Path

    here = Path.cwd()

    def shown(path: Path) -> str:
        return str(path.relative_to(here) if path.is_absolute() and path.is_relative_to(here) else path)

    root = Path(eval_dir)
    words = ["python", "-m", "glasskit_eval", "review"]
    if root.resolve() != (here / "eval").resolve():
        words += ["--eval-dir", shown(root)]
    words += ["--case", result.case, "--target", result.target, "--time", time_label(result.timestamp_s)]
    if report_path:
        words += ["--report", shown(Path(report_path))]
    return " ".join(shlex.quote(w) for w in words)


def failure_lines(summary: RunSummary, report_path: str | None, gated_elsewhere: bool = False) -> list[str]:
    """The failure table, what to run to look at the first failure, and the no-gate note."""
    failures = summary.failures
    if not failures:
        return []
    many = len(summary.run.trials) > 1
    arms = any(f.result.arm is not None for f in failures)
    shown = failures[:FAILURE_ROWS]
    rows = []
    for f in shown:
        r = f.result
        observed = compact(r.observed_value) if r.evaluated and r.observed is not None else "-"
        # The target's id, not its label: the label is in the tables above, the width is needed here.
        row = [r.case, r.target, f"{time_label(r.timestamp_s)}s",
               "-" if r.frame_index is None else str(r.frame_index), _cell(compact(r.expected)),
               _cell(observed), r.status.value, shown_reason(r)]
        rows.append(([str(f.trial)] if many else []) + ([r.arm or ""] if arms else []) + row)
    headers = ["Case", "Target", "Time", "Frame", "Expected", "Observed", "Status", "Reason"]
    right = [False, False, True, True, False, False, False, False]
    if arms:
        headers, right = ["Arm", *headers], [False, *right]
    if many:
        headers, right = ["Trial", *headers], [True, *right]
    noun = "failed or errored attempts" if many else "failed or errored samples"
    if arms:
        noun += f" in {len({f.result.arm for f in failures})} arms"
    title = f"Failures ({len(failures)} {noun})" if len(failures) <= FAILURE_ROWS else \
        f"Failures (first {FAILURE_ROWS} of {len(failures)} {noun})"
    lines = table(title, headers, rows, right, width=WIDTH).splitlines()
    rest = len(failures) - len(shown)
    if rest:
        where = f"see {report_path}" if report_path else "write them all with --output-json PATH"
        lines.append(f"... and {rest} more; {where}")
    lines.append(f"Look at the first: {review_command(failures[0].result, summary.run.eval_dir, report_path)}")
    if summary.total.failed and not summary.correctness_gated and not gated_elsewhere:
        # The adapter-error gate may still have failed the run: then "no gate" would be wrong.
        first = ("Only the adapter-error gate is set, so failed samples do not fail this run;"
                 if summary.failed_gates() else "No gate is set, so failures do not fail this run;")
        lines += [first, "add --min-pass-rate or thresholds."]
    return lines


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
        span = "-" if not known else f"{min(known):.1f}/{mean(known) or 0:.1f}/{max(known):.1f}%"
        mine = [s for s in g.stability if s.evaluated]
        s = StabilityCounts.of(mine)
        rows.append([g.display, span, str(len(mine)), str(s.consistently_passed), str(s.consistently_failed),
                     str(s.flaky), str(s.with_errors)])
    return table("By target", ["Target", "Pass min/mean/max", "Samples", "Pass all", "Fail all", "Flaky",
                               "Errors"], rows, [False, True, True, True, True, True, True])
