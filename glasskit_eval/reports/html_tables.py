"""The HTML report's per-run tables: gates, trials, groups, baseline changes, latency, stability.

Cells are markup: every value goes through :func:`esc` here; a table of one row is folded away
(a closed ``<details>``) so the evidence above it stays in view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..results import Status, TimingMode
from ..statistics.intervals import PassRateInterval
from ..statistics.paired import p_text
from ..summary import Counts, GroupSummary, RunSummary, run_gate_scope
from .html_text import LETTER, clip_time, esc, meter, pct, seconds, value_text

#: Rows of the flaky-sample table; beyond this the page says how many were left out.
MAX_FLAKY_ROWS = 1000


def jump_rows(summary: RunSummary) -> dict[tuple[str, str, int], int]:
    """The row each logical sample links to: its first failing attempt, else its first attempt."""
    row_of: dict[tuple[str, str, int], int] = {}
    failing: set[tuple[str, str, int]] = set()
    index = 0
    for t in summary.run.trials:
        for r in t.results:
            bad = r.status in (Status.FAILED, Status.ERROR)
            if r.key not in row_of or (bad and r.key not in failing):
                row_of[r.key] = index
            if bad:
                failing.add(r.key)
            index += 1
    return row_of


def table(section_id: str, title: str, head: Sequence[str], body: Sequence[Sequence[str]], extra: str = "",
          jumps: Sequence[int] | None = None, fold: bool = True) -> str:
    """A section with a table; cells are markup (callers escape values); ``jumps``: sample rows to link.

    The table scrolls sideways inside its own box, so a narrow screen never pans the whole page.
    With ``fold``, a table of one row starts closed: it repeats the header's numbers.
    """
    if not body:
        return ""
    grid = _grid(head, body, jumps)
    if fold and len(body) == 1:
        return (f'<section id="{section_id}" class="folded"><details><summary><h2>{esc(title)}</h2> '
                f'<span class="hint">(one row)</span></summary>{extra}{grid}</details></section>')
    return f'<section id="{section_id}"><h2>{esc(title)}</h2>{extra}{grid}</section>'


def _grid(head: Sequence[str], body: Sequence[Sequence[str]], jumps: Sequence[int] | None = None) -> str:
    """A table that scrolls sideways in its own box; cells are markup."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    opens = [f'<tr class="jump" data-jump="{j}">' for j in jumps] if jumps is not None else ["<tr>"] * len(body)
    tr = "".join(tag + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for tag, row in zip(opens, body))
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{tr}</tbody></table></div>'


def _time_of(value: Any) -> str:
    """A time read back from a report (any JSON value) in the page's one format."""
    return clip_time(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def gates(summary: RunSummary) -> str:
    rows = [[esc(f"Trial {t.trial}"), esc(g.name), status_badge(g.passed), esc(g.message)]
            for t in summary.run.trials for g in t.gates]
    rows += [[run_gate_scope(g), esc(g.name), status_badge(g.passed), esc(g.message)] for g in summary.run.gates]
    if not rows:
        return '<section id="gates"><h2>Gates</h2><p>No gates were set.</p></section>'
    return table("gates", "Gates", ["Scope", "Gate", "Result", "Message"], rows, fold=False)


def baseline(diff: Mapping[str, Any] | None) -> str:
    """Changes against ``--baseline``: counts, then one row per changed sample (regressions first)."""
    if not diff:
        return ""
    from .baseline import KINDS

    counts = diff.get("counts") or {}  # a JSON report's keys are sorted: list them in KINDS' order
    summary = ", ".join(f"{counts[kind]} {kind.replace('_', ' ')}" for kind in KINDS if counts.get(kind)) or (
        "no changes")
    extra = (f'<p class="meta">Against <code>{esc(str(diff.get("path", "")))}</code>: '
             f'{esc(str(diff.get("matched_samples", 0)))} samples matched; {esc(summary)}.</p>'
             + _significance(diff.get("significance")) + stream_changes(diff.get("streams")))
    rows = []
    for c in diff.get("changes") or []:
        rows.append([esc(str(c.get("kind", ""))).replace("_", " "), esc(str(c.get("case", ""))),
                     esc(str(c.get("target", ""))), esc(_time_of(c.get("timestamp_s"))),
                     esc(str(c.get("baseline_status") or "–")), esc(str(c.get("status") or "–")),
                     esc(value_text(c.get("baseline_observed"))), esc(value_text(c.get("observed")))])
    if not rows:
        return f'<section id="baseline"><h2>Baseline</h2>{extra}</section>'
    return table("baseline", "Changes against the baseline", ["Change", "Case", "Target", "Time", "Before",
                                                                "After", "Observed before", "Observed after"],
                 rows, extra, fold=False)


def _ms_of(value: Any, sign: str = "") -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f"{float(value) * 1000:{sign}.0f} ms" if ok else "–"


def _number_of(value: Any, sign: str = "") -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f"{float(value):{sign}g}" if ok else "–"


def _detected_of(value: Any) -> str:
    return "detected" if value is True else "missed" if value is False else "–"


def stream_changes(streams: Any) -> str:
    """The streams' part of the baseline section, from the JSON report's ``baseline.streams``: the counts,
    each changed event (detected->missed first, latency changes) and each stream whose false alarms changed."""
    if not isinstance(streams, Mapping):
        return ""
    from .streambaseline import EVENT_KINDS

    counts = streams.get("counts") or {}
    said = ", ".join(f"{counts[kind]} {kind.replace('_to_', '->').replace('_', ' ')}"
                     for kind in EVENT_KINDS if counts.get(kind)) or "no changes"
    out = (f'<p class="meta" id="baseline-streams">Streams: {esc(str(streams.get("matched_events", 0)))} events '
           f'matched; {esc(said)}.</p>')
    events = [c for c in streams.get("events") or [] if isinstance(c, Mapping)]
    if events:
        rows = [[esc(str(c.get("kind", "")).replace("_to_", "->").replace("_", " ")), esc(str(c.get("case", ""))),
                 esc(str(c.get("target", ""))), esc(_time_of(c.get("at"))), esc(_detected_of(c.get("baseline_detected"))),
                 esc(_detected_of(c.get("detected"))), esc(_ms_of(c.get("baseline_latency_s"))),
                 esc(_ms_of(c.get("latency_s"))), esc(_ms_of(c.get("latency_change_s"), "+"))] for c in events]
        out += _grid(["Event change", "Case", "Target", "At", "Before", "After", "Latency before", "after", "change"],
                     rows)
    alarms = [a for a in streams.get("false_alarms") or [] if isinstance(a, Mapping) and a.get("change")]
    if alarms:
        rows = [[esc(str(a.get("case", ""))), esc(str(a.get("target", ""))), esc(_number_of(a.get("baseline_false_alarms"))),
                 esc(_number_of(a.get("false_alarms"))), esc(_number_of(a.get("change"), "+"))] for a in alarms]
        out += _grid(["Case", "Target", "False alarms before", "after", "change"], rows)
    return out


def _significance(test: Any) -> str:
    """The verdict of the paired test, as the JSON report recorded it (reports read back may lack it)."""
    if not isinstance(test, Mapping):
        return ""
    try:
        ci = test["ci"]
        text = (f"{test['verdict']}: pass rate {float(test['delta_pass_rate']) * 100:+.1f} points "
                f"({float(test['level']) * 100:g}% CI {float(ci['low']) * 100:+.1f} to {float(ci['high']) * 100:+.1f}; "
                f"{p_text(float(test['p_value']))}, one-sided{_holm(test)}; "
                f"{float(test['effective_pairs']):.0f} effective pairs)")
        why = test.get("inconclusive_stretch")
        if isinstance(why, Mapping):
            text += (f"; longest pass->fail stretch: {why['samples']} samples of {why['case']}/{why['target']}, "
                     f"{float(why['from_s']):g}s to {float(why['to_s']):g}s"
                     + (f"; rerun with --repeat {why['suggested_repeat']}" if why.get("suggested_repeat") else ""))
    except (KeyError, TypeError, ValueError):
        return ""
    return f'<p class="meta" id="significance">{esc(text)}</p>'


def _holm(test: Mapping[str, Any]) -> str:
    """``, Holm over N tests`` when the test was adjusted in a family (older reports: always)."""
    size = test.get("family_tests")
    if isinstance(size, int) and not isinstance(size, bool):
        return f", Holm over {size} tests" if size > 1 else ""
    return ", Holm"


def status_badge(passed: bool) -> str:
    return '<span class="s s-passed">pass</span>' if passed else '<span class="s s-failed">fail</span>'


def _count_cells(c: Counts, interval: PassRateInterval | None) -> list[str]:
    return [str(c.passed), str(c.failed), str(c.errors), str(c.ignored), meter(c.pass_rate), _interval(interval)]


def _interval(interval: PassRateInterval | None) -> str:
    if interval is None:
        return "–"
    detail = (f"{interval.level * 100:g}% interval, {interval.effective_samples:.0f} effective of "
              f"{interval.samples} samples")
    bounds = f"{pct(interval.low)} – {pct(interval.high)}"
    return f'<span title="{esc(detail)}">{esc(bounds)}</span>'


def trials(summary: RunSummary) -> str:
    rows = [[str(t.trial.trial), status_badge(t.trial.success), *_count_cells(t.counts, t.pass_rate_ci),
             esc(seconds(t.trial.duration_seconds)),
             esc("–" if t.throughput is None else f"{t.throughput:.1f}/s")] for t in summary.trials]
    if len(rows) > 1:
        rows.append(["<b>All</b>", status_badge(summary.success), *_count_cells(summary.total, summary.pass_rate_ci),
                     esc(seconds(summary.run.duration_seconds)), ""])
    return table("trials", "Trials", ["Trial", "Gates", "Passed", "Failed", "Errors", "Ignored",
                                       "Pass rate", "Interval", "Duration", "Throughput"], rows)


def groups(title: str, section_id: str, groups: Sequence[GroupSummary]) -> str:
    rows = []
    for g in groups:
        rates = ", ".join(pct(r) for r in g.trial_rates) if len(g.trial_rates) > 1 else ""
        flaky = sum(1 for s in g.stability if s.flaky)
        rows.append([esc(g.display), *_count_cells(g.counts, g.pass_rate_ci), esc(rates), str(flaky)])
    return table(section_id, title, ["Name", "Passed", "Failed", "Errors", "Ignored", "Pass rate",
                                      "Interval", "Per trial", "Flaky"], rows)


def latency(summary: RunSummary) -> str:
    """Latency percentiles (and usage, when the adapter reported any) per target and overall."""
    groups = [(g.display, g.counts) for g in summary.targets]
    if len(groups) > 1:
        groups.append(("All targets", summary.total))
    usage_keys = [key for key, _value in summary.total.usage]
    rows = []
    for name, counts in groups:
        latency = counts.latency
        if latency is None:
            continue
        usage = dict(counts.usage)
        rows.append([esc(name), str(len(counts.durations)), esc(seconds(counts.average_latency)),
                     *(esc(seconds(v)) for v in (latency.p50, latency.p90, latency.p95, latency.max)),
                     *(esc(f"{usage[k]:g}") if k in usage else "–" for k in usage_keys)])
    batch = summary.timing_mode is TimingMode.BATCH
    extra = ('<p class="hint">Batch timing: each evaluate_many call\'s duration is divided among its '
             "samples.</p>" if batch else "")
    return table("latency", "Latency and usage per target" if usage_keys else "Latency per target",
                  ["Target", "Timed", "Mean", "p50", "p90", "p95", "Max", *usage_keys], rows, extra)


def stability(summary: RunSummary) -> str:
    if summary.run.repeat < 2:
        return ""
    counts = summary.stability_counts()
    flaky = [s for s in summary.stability if s.flaky]
    extra = (f'<p>{counts.consistently_passed} consistently passed, {counts.consistently_failed} '
             f"consistently failed, {counts.flaky} flaky, {counts.with_errors} with errors.</p>")
    if len(flaky) > MAX_FLAKY_ROWS:
        extra += f'<p class="note">Showing the first {MAX_FLAKY_ROWS} of {len(flaky)} flaky samples.</p>'
    rows = []
    row_of = jump_rows(summary)
    for s in flaky[:MAX_FLAKY_ROWS]:
        r = s.first
        seq = "".join(f'<span class="q q-{x.value}">{LETTER[x]}</span>' for x in s.statuses)
        passed = s.statuses.count(Status.PASSED)
        rows.append([esc(r.case), esc(r.target), esc(clip_time(r.timestamp_s)), seq,
                     pct(passed / s.evaluated if s.evaluated else None)])
    if not rows:
        return (f'<section id="stability"><h2>Stability over {summary.run.repeat} trials</h2>{extra}'
                "<p>No flaky samples.</p></section>")
    jumps = [row_of[s.first.key] for s in flaky[:MAX_FLAKY_ROWS]]
    return table("stability", f"Stability over {summary.run.repeat} trials",
                  ["Case", "Target", "Time", "Trials (P/F/E/I)", "Pass rate"], rows,
                  extra + '<p class="hint">Click a sample to see its attempts.</p>', jumps, fold=False)


