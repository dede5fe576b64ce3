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
from ..support.outside import inline, quoted_lines, write_command
from ..support.tracebacks import last_frame
from .calls import console_lines, detectable_text, interval_text
from .early_stop import verdict_tail
from .progress import ProgressDisplay, terminal_columns
from .streams import (
    EventCounts,
    event_counts,
    stream_findings,
    stream_name,
    stream_stability_table,
    stream_table,
    streams_gated,
)
from .tables import WIDTH, compact, pct, plural, seconds, table, time_label

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
        #: Streams of the running case not yet reported: its progress lasts until they are.
        self._streams_left = 0
        self._trial = (1, 1)

    def _print(self, text: str = "") -> None:
        self.progress.write_above(fit_terminal(text, self.out))

    def _status(self, status: Status) -> str:
        word = status.value.upper()
        if self.colour:
            return f"\033[{_COLOURS.get(status, '0')}m{word}\033[0m"
        return word

    def trial_started(self, trial: int, total: int) -> None:
        self._trial = (trial, total)
        self._print()
        self._print(f"Trial {trial}/{total}")

    def case_started(self, case: CaseHeader, trial: int, total: int) -> None:
        self._print(f"Case {case.name} ({case_contents(case)}, video={case.video})")
        self._trial = (trial, total)
        self._streams_left = case.streams
        self.progress.case_started(case.name, self._number(case.name), max(len(self.case_names), 1), case.samples,
                                   trial, total, streams=case.streams)

    def _number(self, case: str) -> int:
        return self.case_names.index(case) + 1 if case in self.case_names else 1

    def stream_fed(self, case: str, fed: int, total: int) -> None:
        if self.progress.case is None or self.progress.case.case != case:
            # A resumed case whose samples were all done is not announced: its streams still show.
            self.progress.case_started(case, self._number(case), max(len(self.case_names), 1), 0, *self._trial,
                                       streams=1)
        self.progress.stream_fed(fed, total)

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
        self._print(f"  {prefix}stream {stream_name(result.target, result.arm)}: {result.frames_delivered} frames{dropped}, "
                    f"{m.detected}/{m.events} events detected, {plural(m.repeats, 'repeat')}, "
                    f"{plural(m.false_alarms, 'false alarm')}"
                    f"{stopped}")
        self._streams_left -= 1
        if self._streams_left <= 0:
            self.progress.case_finished()

    def tick(self) -> None:
        self.progress.tick()

    def notice(self, text: str) -> None:
        self._print(f"warning: {text}")

    def case_finished(self, case: CaseHeader, results: list[SampleResult], trial: int, total: int) -> None:
        if not case.streams:
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


def fit_terminal(text: str, stream: TextIO) -> str:
    """``text`` as a terminal of its width shows it without running past the edge: a long line
    (a failure's reason) wraps onto lines indented under it. Pipes and logs get it unchanged, one
    line per result, for grep."""
    if not use_colour_or_terminal(stream):
        return text
    import textwrap

    width = terminal_columns(stream)
    out = []
    for line in text.split("\n"):
        if len(_ANSI.sub("", line)) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip(" "))
        out += textwrap.wrap(line, width, initial_indent="", subsequent_indent=" " * (lead + 2),
                             break_long_words=False, break_on_hyphens=False, drop_whitespace=True) or [line]
    return "\n".join(out)


_ANSI = re.compile(r"\033\[[0-9;]*m")


def use_colour_or_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def case_contents(case: CaseHeader) -> str:
    """``12 samples``, ``1 stream`` or ``12 samples, 2 streams``: what the case's header announces."""
    parts = [plural(case.samples, "sample")] if case.samples or not case.streams else []
    if case.streams:
        parts.append(plural(case.streams, "stream"))
    return ", ".join(parts)


def indent_block(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def print_summary(summary: RunSummary, out: TextIO, *, resume_hint: str | None = None,
                  report_path: str | None = None, gated_elsewhere: bool = False, fold: bool = False) -> None:
    """The run's summary; ``gated_elsewhere``: a shard, whose gates ``merge-reports`` applies;
    ``fold``: long tables fold into GitHub Actions log groups (their title stays visible)."""
    def p(text: str = "") -> None:
        # A command to copy stays one line; prose wraps on a terminal (see fit_terminal).
        keep = text.startswith(("Look at the first: ", "Resume with")) or "\nLook at the first: " in text
        print(text if keep else fit_terminal(text, out), file=out)

    def section(text: str) -> None:
        if not fold:
            p(text)
            return
        title, _, rest = text.partition("\n")
        write_command(out, f"::group::{title}")
        p(rest)
        write_command(out, "::endgroup::")

    run = summary.run
    total = summary.total
    many = len(run.trials) > 1
    events = event_counts(summary)
    # A run of stream targets only has no sample figures to show: no zero counts, no empty table.
    samples = has_samples(summary) or events is None
    p()
    p(f"Eval: {run.eval_dir}")
    p(f"Cases: {len(run.cases)}")
    if summary.arm is not None:
        p(f"Arm: {summary.arm} (the control; arms are never pooled: each arm's figures are in the arms table)")
    if events is not None:
        p(streams_headline(events, many))
    if not samples:
        pass
    elif not many:
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
    if run.duration_seconds > 0 and samples:
        p(f"Throughput: {total.evaluated / run.duration_seconds:.2f} {unit}s/s")
    elif run.duration_seconds > 0 and events is not None:
        p(f"Throughput: {events.frames / run.duration_seconds:.1f} frames/s")
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

    if samples:
        p()
        section(_target_table(summary))
    for streams in (stream_table(summary), stream_stability_table(summary)):
        if streams is not None:
            p()
            section(streams)
    findings = stream_findings(summary)
    if findings:
        p()
        section("\n".join(findings))
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
    print(fit_terminal(verdict_line(summary), out), file=out)


def has_samples(summary: RunSummary) -> bool:
    """Whether the run judged (or ignored) any sample; a run of stream targets only has none."""
    return any(t.results for t in summary.run.trials)


def streams_headline(events: EventCounts, many: bool) -> str:
    """``Streams: 1 (750 frames fed): 1 of 4 events missed, 1 false alarm`` (over every trial with --repeat)."""
    over = " over every trial" if many else ""
    return (f"Streams: {events.streams} ({events.frames} frames fed){over}: {events.text()}")


def verdict_line(summary: RunSummary) -> str:
    """The last line of a run, in pytest's manner: what was judged, how long it took, which gates failed.

    Samples and stream events are both counted. A run that judged something wrong but passed
    because no gate looks at it says ``NOT GATED`` (its exit code is still 0, as upstream's),
    never ``PASSED``.
    """
    total = summary.total
    parts = [f"{n} {word}" for n, word in ((total.failed, "failed"), (total.errors, "errors"),
                                           (total.passed, "passed"), (total.ignored, "ignored"),
                                           (total.not_evaluated, "not evaluated")) if n]
    events = event_counts(summary)
    judged = [", ".join(parts)] if parts else []
    if events is not None:
        judged.append(events.text())
    counts = "; ".join(judged) or "nothing evaluated"
    failed = sorted({g.name for _scope, g in summary.failed_gates()})
    if failed:
        tail = f"; gates: {', '.join(failed)}"
    elif _ungated(summary):
        tail = "; no gate is set"
    else:
        tail = ""
    return f"{verdict_word(summary)}: {counts} in {seconds(summary.run.duration_seconds)}{tail}{verdict_tail(summary)}"


def _ungated(summary: RunSummary) -> bool:
    """Something was judged wrong and no gate looks at it: a failed sample without a correctness
    gate, or a missed event, false alarm or stopped stream without a stream gate."""
    total = summary.total
    events = event_counts(summary)
    samples_wrong = bool(total.failed or total.errors) and not summary.correctness_gated
    events_wrong = events is not None and events.bad and not streams_gated(summary)
    return samples_wrong or events_wrong


def verdict_word(summary: RunSummary) -> str:
    """``PASSED``, ``FAILED`` (a gate failed), or ``NOT GATED`` (it passed only because no gate judged what went wrong)."""
    return "FAILED" if not summary.success else "NOT GATED" if _ungated(summary) else "PASSED"

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
