"""GitHub Actions output (pure): ``::error`` workflow commands at sample lines and a job summary.

Workflow commands follow GitHub's escaping rules: in the message ``%``, CR and LF are
percent-encoded; in property values ``:`` and ``,`` are too. A run with many failures would
flood the pull request, so at most :data:`MAX_ANNOTATIONS` samples are annotated and one more
annotation says how many were left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..results import Gate, SampleResult, Status
from ..summary import RunSummary
from ..support.outside import inline
from .baseline import CHANGE_HEADERS, BaselineDiff, change_rows, significance_lines
from .calls import interval_text
from .junit import review_command
from .locations import Locations, SampleLocation, relative_path
from .tables import compact, pct, plural, time_label

MAX_ANNOTATIONS = 50
#: Rows of each job-summary table (GitHub caps a summary at 1 MiB).
MAX_SUMMARY_ROWS = 50


#: Lone surrogates: UTF-8 (the runner's log, the summary file) cannot encode them.
_SURROGATES = re.compile("[\ud800-\udfff]")


def _encodable(text: str) -> str:
    return _SURROGATES.sub("\N{REPLACEMENT CHARACTER}", text)


def escape_data(text: str) -> str:
    # Line ends are GitHub's to encode; other control characters (ESC, CSI, U+2028) are escaped.
    encoded = _encodable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return inline(encoded)


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(command: str, message: str, **properties: str | None) -> str:
    props = ",".join(f"{name}={escape_property(value)}" for name, value in properties.items()
                     if value is not None)
    return f"::{command}{' ' + props if props else ''}::{escape_data(message)}"


@dataclass(frozen=True, slots=True)
class _Failing:
    first: SampleResult
    failed_trials: int
    trials: int


def failing_samples(summary: RunSummary) -> list[_Failing]:
    """Each sample that failed or errored in some trial, in run order, with its first bad result
    (with arms, each arm's sample on its own: arms are never pooled)."""
    firsts: dict[tuple[str | None, str, str, int], SampleResult] = {}
    counts: dict[tuple[str | None, str, str, int], int] = {}
    for trial in summary.run.trials:
        for r in trial.results:
            if r.status in (Status.FAILED, Status.ERROR):
                key = (r.arm, *r.key)
                firsts.setdefault(key, r)
                counts[key] = counts.get(key, 0) + 1
    trials = len(summary.run.trials)
    return [_Failing(firsts[k], counts[k], trials) for k in firsts]


def _title(item: _Failing) -> str:
    r = item.first
    what = "error" if r.status is Status.ERROR else "failed"
    if item.trials > 1:
        what += f" in {item.failed_trials} of {item.trials} trials"
    arm = f"[{r.arm}] " if r.arm is not None else ""
    return f"{arm}{r.case} / {r.target} @ {time_label(r.timestamp_s)}s {what}"


def _message(r: SampleResult, eval_dir: str) -> str:
    lines = [r.reason, f"expected: {compact(r.expected)}", f"observed: {compact(r.observed_value)}"]
    if r.frame_index is not None:
        lines.append(f"frame: {r.frame_index}")
    lines.append(f"review: {review_command(eval_dir, r)}")
    return "\n".join(lines)


def github_annotations(summary: RunSummary, locations: Locations, *, workspace: str, eval_dir: str,
                       gate_places: Mapping[str, SampleLocation] | None = None) -> list[str]:
    """One ``::error`` line per failed gate and per failed or errored sample (capped), paths
    relative to ``workspace``; a gate is annotated where it is set (``gate_places``), if anywhere."""
    lines = gate_annotations(summary, gate_places or {}, workspace)
    items = failing_samples(summary)
    for item in items[:MAX_ANNOTATIONS]:
        where = locations.get(item.first.key)
        file = None if where is None else relative_path(where.path, workspace)
        line = None if where is None or where.line is None else str(where.line)
        lines.append(workflow_command("error", _message(item.first, eval_dir), file=file, line=line,
                                      title=_title(item)))
    from .streams import missed_event_annotations

    lines += missed_event_annotations(summary, locations, workspace, workflow_command)[:MAX_ANNOTATIONS]
    left = len(items) - MAX_ANNOTATIONS
    if left > 0:
        lines.append(workflow_command(
            "error", f"{left} more failed or errored samples are not annotated; see the job summary "
            "or the JUnit report for all of them", title=f"glasskit_eval: {left} more failing samples"))
    return lines


def gate_annotations(summary: RunSummary, places: Mapping[str, SampleLocation], workspace: str) -> list[str]:
    """One ``::error`` per failed gate (once per name, however many trials it failed in)."""
    failed: dict[str, tuple[Gate, int]] = {}
    for _scope, gate in summary.failed_gates():
        seen = failed.get(gate.name)
        failed[gate.name] = (seen[0] if seen else gate, (seen[1] if seen else 0) + 1)
    trials = len(summary.run.trials)
    lines = []
    for name, (gate, times) in failed.items():
        where = places.get(name)
        file = None if where is None else relative_path(where.path, workspace)
        line = None if where is None or where.line is None else str(where.line)
        title = f"gate {name} failed" + (f" in {times} of {trials} trials" if times > 1 else "")
        lines.append(workflow_command("error", gate.message, file=file, line=line, title=title))
    return lines


def _cell(text: str) -> str:
    # GitHub splits table rows on `|` before anything else, even inside code spans.
    return inline(_encodable(text).replace("|", "\\|").replace("\r", " ").replace("\n", " "))


def _code(text: str) -> str:
    """``text`` as a code span: fenced by more backticks than it contains in a row."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


#: Columns holding names from case files: code spans, so an id is never live Markdown (a link, an image).
_NAME_COLUMNS = ("Case", "Target", "Stream")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    names = [header in _NAME_COLUMNS for header in headers]
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_cell(_code(c) if name and c else c) for name, c in zip(names, row)) + " |"
            for row in rows]
    return out


def _capped(rows: list[list[str]], what: str) -> tuple[list[list[str]], list[str]]:
    if len(rows) <= MAX_SUMMARY_ROWS:
        return rows, []
    return rows[:MAX_SUMMARY_ROWS], ["", f"… and {len(rows) - MAX_SUMMARY_ROWS} more {what}."]


def _streams_section(summary: RunSummary) -> list[str]:
    """Every stream's figures, then each missed event and false alarm with its time (none: no section)."""
    from .streams import STREAM_ROW_HEADERS, findings, stream_rows

    rows = stream_rows(summary)
    if not rows:
        return []
    out = ["", "### Streams", "", *_table(STREAM_ROW_HEADERS, rows)]
    found = [[f.stream, f.when, f.kind, _code(f.detail)] for f in findings(summary)]
    if found:
        shown, more = _capped(found, "missed events and false alarms")
        out += ["", *_table(["Stream", "Time", "Finding", "Detail"], shown), *more]
    return out


def step_summary(summary: RunSummary, baseline: BaselineDiff | None = None, *, title: str = "glasskit_eval",
                 html: str | None = None, artifacts_url: str | None = None) -> str:
    """The job summary (GitHub-flavoured Markdown), ending in a newline.

    ``html``: the HTML report this run wrote; ``artifacts_url``: where the workflow run's
    artifacts are listed, to link the report from (when it is uploaded as one).
    """
    from .console import has_samples, verdict_word
    from .streams import event_counts

    run = summary.run
    total = summary.total
    out = [f"## {title}: {verdict_word(summary).lower()}", ""]
    if html is not None:
        where = f"; [the run's artifacts]({artifacts_url}) hold it once uploaded" if artifacts_url else ""
        out += [f"HTML report: {_code(html)}{where}.", ""]
    trials = f", {len(run.trials)} trials" if len(run.trials) > 1 else ""
    events = event_counts(summary)
    samples = has_samples(summary) or events is None
    arm = f" (arm {summary.arm}, the control; each arm's figures are its own)" if summary.arm is not None else ""
    judged = [f"{total.evaluated} evaluated, {total.passed} passed, {total.failed} failed, {total.errors} errors, "
              f"{total.ignored} ignored; pass rate {pct(total.pass_rate)}{interval_text(summary.pass_rate_ci)}"
              ] if samples else []
    if events is not None:
        judged.append(f"{events.text()} in {plural(events.streams, 'stream')}")
    out.append(f"{len(run.cases)} cases{trials}{arm}: {'; '.join(judged)}")
    gates = [(f"Trial {t.trial}" if len(run.trials) > 1 else "Run", g) for t in run.trials for g in t.gates]
    gates += [("Run", g) for g in run.gates]
    if gates:
        out += ["", "### Gates", ""]
        out += _table(["Scope", "Gate", "Result", "Detail"],
                      [[scope, _code(g.name), "✅ passed" if g.passed else "❌ failed", g.message]
                       for scope, g in gates])
    if samples:
        out += ["", "### By target", ""]
        out += _table(["Target", "Pass rate", "Passed", "Failed", "Errors", "Ignored"],
                      [[g.display, pct(g.counts.pass_rate), str(g.counts.passed), str(g.counts.failed),
                        str(g.counts.errors), str(g.counts.ignored)] for g in summary.targets])
    out += _streams_section(summary)
    failing = failing_samples(summary)
    if failing:
        rows = [[(f"[{f.first.arm}] " if f.first.arm is not None else "") + f.first.case, f.first.target,
                 f"{time_label(f.first.timestamp_s)}s",
                 f.first.status.value + (f" ({f.failed_trials}/{f.trials})" if f.trials > 1 else ""),
                 _code(compact(f.first.expected)), _code(compact(f.first.observed_value)), _code(f.first.reason)]
                for f in failing]
        shown, more = _capped(rows, "failing samples")
        out += ["", "### Failures", ""]
        out += _table(["Case", "Target", "Time", "Status", "Expected", "Observed", "Reason"], shown) + more
    if baseline is not None:
        counts = ", ".join(f"{n} {kind}" for kind, n in baseline.counts().items() if n) or "no changes"
        out += ["", "### Baseline", "", f"Against {_code(baseline.path)}: {baseline.matched} samples matched; "
                f"{counts}."]
        tested = significance_lines(baseline)
        if tested:
            # Two trailing spaces: one Markdown line each, in one paragraph.
            out += ["", *(f"{line.strip()}  " for line in tested)]
        if baseline.changes:
            shown, more = _capped(change_rows(baseline), "changes")
            out += ["", *_table(CHANGE_HEADERS, shown), *more]
        if baseline.streams is not None:
            from .streambaseline import EVENT_HEADERS, event_rows, summary_line

            out += ["", f"{summary_line(baseline.streams)}."]
            if baseline.streams.events:
                shown, more = _capped(event_rows(baseline.streams), "event changes")
                out += ["", *_table(EVENT_HEADERS, shown), *more]
    return "\n".join(out) + "\n"
