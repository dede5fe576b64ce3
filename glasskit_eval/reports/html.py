"""The HTML report: one self-contained file rendered from a RunSummary (sans-IO).

:func:`render_html` is a pure function from a summary (plus thumbnails and a few options) to text;
the callers (``run --html``, ``report --html``) do the reading and writing. The page works from
``file://`` with no network: CSS and JS are inlined from package data, thumbnails are data URIs,
and a Content-Security-Policy allows nothing else (scripts and styles by hash, images from
``data:`` only). Observed values are adapter output and treated as hostile: every value in the
markup goes through :func:`html.escape`, and the sample data travels as JSON in a data block with
``<``, ``>`` and ``&`` escaped, which the page's script only ever puts into ``textContent``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..results import SampleResult, Stability, Status, TimingMode
from ..statistics.intervals import PassRateInterval
from ..summary import Counts, GroupSummary, RunSummary, run_gate_scope
from .thumbnails import DEFAULT_BUDGET_BYTES, ThumbKey, data_uri_size, wants_thumbnail

#: Longest expected/observed/reason text put in the page per sample; the JSON report has the rest.
MAX_TEXT = 2000
#: Rows of the flaky-sample table; beyond this the page says how many were left out.
MAX_FLAKY_ROWS = 1000

_STATUS_ORDER = (Status.ERROR, Status.FAILED, Status.PASSED, Status.IGNORED)
_RANK = {s: i for i, s in enumerate(_STATUS_ORDER)}
_LETTER = {Status.PASSED: "P", Status.FAILED: "F", Status.ERROR: "E", Status.IGNORED: "I"}
_RANGE = re.compile(r"range \[([-+0-9.eE]+), ([-+0-9.eE]+)\)")


@dataclass(frozen=True)
class HtmlOptions:
    #: JPEG thumbnails by (case, frame index).
    thumbnails: Mapping[ThumbKey, bytes] = field(default_factory=dict)
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    #: Frames that wanted a thumbnail after the budget was spent while collecting them.
    over_budget: Collection[ThumbKey] = ()
    #: Clip durations in seconds by case name (timeline scale); else the last sample's time.
    durations: Mapping[str, float] = field(default_factory=dict)
    #: Directory the page will be written to: artifact links are made relative to it.
    output_dir: str | None = None
    #: Report files the summary was read from (``report``); empty for a run.
    sources: tuple[str, ...] = ()
    #: Lines shown under the header (for example frames that could not be decoded).
    notes: tuple[str, ...] = ()
    #: The comparison with ``--baseline`` in its JSON report form (``BaselineDiff.to_json``), if any.
    baseline: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Assets:
    css: str
    js: str

    @classmethod
    def packaged(cls) -> Assets:
        from ..support.resources import read_text

        return cls(read_text("assets", "html_report.css"), read_text("assets", "html_report.js"))


def render_html(summary: RunSummary, options: HtmlOptions | None = None, assets: Assets | None = None) -> str:
    options = options or HtmlOptions()
    assets = assets or Assets.packaged()
    run = summary.run
    rows, thumbs, thumb_notes = _rows(summary, options)
    data = {"cases": list(_case_names(summary)), "targets": [t.name for t in summary.targets],
            "targetDisplay": [t.display for t in summary.targets], "repeat": run.repeat,
            "rows": rows, "thumbs": thumbs, "timelines": _timelines(summary, options)}
    verdict = "PASSED" if summary.success else "FAILED"
    title = f"glasskit_eval: {verdict} · {run.eval_dir}"
    body = "".join([
        _header(summary, verdict, options, thumb_notes),
        _gates(summary), _trials(summary), _groups("By target", "targets", summary.targets),
        _groups("By case", "cases", summary.cases), _baseline(options.baseline), _latency(summary),
        _stability(summary),
        '<section id="timelines"><h2>Timelines</h2><p class="hint">One strip per target over the '
        "clip: marks are samples, bands are ranges. Hover for the sample, click to jump to its row."
        '</p><div id="timeline-root"></div></section>',
        _samples_section(summary),
        '<div id="lightbox" hidden><figure><img id="lightbox-img" alt=""><figcaption id="lightbox-caption">'
        '</figcaption></figure></div><div id="tip" role="tooltip" hidden></div>',
    ])
    css, js = assets.css, assets.js
    csp = ("default-src 'none'; img-src data:; "
           f"style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; base-uri 'none'; form-action 'none'")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{css}</style></head>"
        f'<body class="{"ok" if summary.success else "bad"}">{body}'
        f'<script type="application/json" id="report-data">{_json_block(data)}</script>'
        f"<script>{js}</script></body></html>\n")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _json_block(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # Nothing in a data block may close it or open a comment; JSON allows these escapes anywhere.
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.1f}%"


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _meter(rate: float | None) -> str:
    if rate is None:
        return "–"
    return f'<meter min="0" max="1" low="0.999" optimum="1" value="{rate:.4f}"></meter> {_pct(rate)}'


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True,
                                                          default=str)
    return _clip(text)


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}… ({len(text) - MAX_TEXT} more characters in the JSON report)"


def _case_names(summary: RunSummary) -> list[str]:
    names = list(summary.run.cases)
    seen = set(names)
    for t in summary.run.trials:
        for r in t.results:
            if r.case not in seen:
                seen.add(r.case)
                names.append(r.case)
    return names


def review_command(eval_dir: str, result: SampleResult) -> str:
    return " ".join(["python -m glasskit_eval review", "--eval-dir", shlex.quote(eval_dir),
                     "--case", shlex.quote(result.case), "--target", shlex.quote(result.target),
                     "--time", repr(float(result.timestamp_s))])


def _artifact_link(path: str, output_dir: str | None) -> str:
    from urllib.parse import quote

    if output_dir is not None:
        try:
            rel = os.path.relpath(path, output_dir)
        except ValueError:  # another drive (Windows)
            rel = path
        # Relative when the artifacts sit near the page (they travel together in a CI artifact).
        if not rel.startswith(".." + os.sep + ".." + os.sep + ".."):
            return quote(rel.replace(os.sep, "/"))
    return "file://" + quote(os.path.abspath(path).replace(os.sep, "/"))


def _rows(summary: RunSummary, options: HtmlOptions) -> tuple[list[list[Any]], list[str], list[str]]:
    """One row per attempt, and the embedded thumbnails; failures get theirs first, in table order."""
    cases = {name: i for i, name in enumerate(_case_names(summary))}
    targets = {t.name: i for i, t in enumerate(summary.targets)}
    attempts = [(t.trial, r) for t in summary.run.trials for r in t.results]
    failing = sorted((i for i, (_, r) in enumerate(attempts) if wants_thumbnail(r)),
                     key=lambda i: (_RANK[attempts[i][1].status], cases[attempts[i][1].case],
                                    targets[attempts[i][1].target], attempts[i][1].timestamp_s))
    thumb_of: dict[int, int | str] = {}
    thumb_index: dict[ThumbKey, int] = {}
    thumbs: list[str] = []
    counted: set[ThumbKey] = set()
    used = over = missing = linked = 0
    for i in failing:
        r = attempts[i][1]
        assert r.frame_index is not None
        key = (r.case, r.frame_index)
        if key in thumb_index:
            thumb_of[i] = thumb_index[key]
            continue
        jpeg = options.thumbnails.get(key)
        if jpeg is not None and used + data_uri_size(jpeg) <= options.budget_bytes:
            used += data_uri_size(jpeg)
            thumb_index[key] = len(thumbs)
            thumb_of[i] = len(thumbs)
            thumbs.append("data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii"))
            continue
        # Each attempt links to its own artifact; the note counts frames, once each.
        first = key not in counted
        counted.add(key)
        if first and (jpeg is not None or key in options.over_budget):
            over += 1
        if r.artifact_image:
            thumb_of[i] = _artifact_link(r.artifact_image, options.output_dir)
            linked += first
        else:
            missing += first
    notes = []
    if over:
        notes.append(f"The {options.budget_bytes / 1e6:g} MB thumbnail budget is spent: {over} more "
                     f"failed frame(s) are not embedded; {linked} link to their --save-failures artifact"
                     + (f", {missing} have none (run with --save-failures to keep them)." if missing else "."))
    elif missing:
        notes.append(f"{missing} failed frame(s) have no thumbnail (render from the run with --html, "
                     "keep --save-failures artifacts, or give report --eval-dir with the videos).")
    eval_dir = summary.run.eval_dir
    rows = []
    for i, (trial, r) in enumerate(attempts):
        failed = r.status in (Status.FAILED, Status.ERROR)
        rows.append([trial, cases[r.case], targets[r.target], r.sample_index, r.timestamp_s, r.frame_index,
                     _RANK[r.status], _value_text(r.expected), _value_text(r.observed_value),
                     _clip(r.reason), thumb_of.get(i), review_command(eval_dir, r) if failed else None])
    return rows, thumbs, notes


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


def _timelines(summary: RunSummary, options: HtmlOptions) -> list[dict[str, Any]]:
    """Per case: its duration, and per target the marks (one per logical sample) and range bands."""
    row_of = jump_rows(summary)
    targets = {t.name: i for i, t in enumerate(summary.targets)}
    out = []
    for case in _case_names(summary):
        items = [s for s in summary.stability if s.first.case == case]
        if not items:
            continue
        end = max(s.first.timestamp_s for s in items)
        duration = options.durations.get(case) or (end * 1.02 if end > 0 else 1.0)
        strips: dict[str, dict[str, Any]] = {}
        bands: dict[tuple[str, str], list[float]] = {}
        for s in items:
            r = s.first
            strip = strips.setdefault(r.target, {"target": targets[r.target], "marks": [], "bands": []})
            worst = _RANK[_worst(s)]
            strip["marks"].append([r.timestamp_s, worst, row_of[r.key], "".join(_LETTER[x] for x in s.statuses)])
            match = _RANGE.fullmatch(r.source)
            if match:
                band = bands.setdefault((r.target, r.source), [float(match[1]), float(match[2]), worst])
                band[2] = min(band[2], worst)
        for (target, _source), band in bands.items():
            strips[target]["bands"].append(band)
        for strip in strips.values():
            strip["marks"].sort(key=lambda m: m[0])
        out.append({"case": case, "duration": duration,
                    "strips": sorted(strips.values(), key=lambda s: s["target"])})
    return out


def _worst(s: Stability) -> Status:
    return min(s.statuses, key=lambda x: _RANK[x])


def _header(summary: RunSummary, verdict: str, options: HtmlOptions, thumb_notes: list[str]) -> str:
    run = summary.run
    total = summary.total
    first = summary.first
    stats = [("Pass rate (attempts)", _pct(total.pass_rate)),
             ("Passed", total.passed), ("Failed", total.failed), ("Errors", total.errors),
             ("Ignored", total.ignored), ("Samples", first.evaluated + first.ignored),
             ("Trials", len(run.trials)), ("Duration", f"{run.duration_seconds:.2f} s")]
    interval = summary.pass_rate_ci
    if interval is not None:
        stats.insert(1, (f"{interval.level * 100:g}% interval", f"{_pct(interval.low)} – {_pct(interval.high)} "
                         f"({interval.effective_samples:.0f} effective of {interval.samples} samples)"))
    if len(summary.trial_rates) > 1:
        rates = summary.trial_rates
        stats.insert(1, ("Trial pass rates", f"{_pct(min(rates))} – {_pct(max(rates))}"))
    items = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in stats)
    source = ""
    if options.sources:
        source = "<p class=\"meta\">Rendered from " + ", ".join(
            f"<code>{_e(s)}</code>" for s in options.sources) + "</p>"
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in (*options.notes, *thumb_notes))
    failed = summary.failed_gates()
    gates = "" if not failed else "<ul class=\"failed-gates\">" + "".join(
        f"<li>{_e(scope)}: {_e(g.message)}</li>" for scope, g in failed) + "</ul>"
    return (f'<header class="top"><h1><span class="verdict" id="verdict">{verdict}</span> '
            f'glasskit_eval report</h1><p class="meta">Eval directory <code>{_e(run.eval_dir)}</code>'
            f"</p>{source}<dl class=\"stats\">{items}</dl>{gates}{notes}</header>")


def _table(section_id: str, title: str, head: Sequence[str], body: Sequence[Sequence[str]], extra: str = "",
           jumps: Sequence[int] | None = None) -> str:
    """A section with a table; cells are markup (callers escape values); ``jumps``: sample rows to link."""
    if not body:
        return ""
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    opens = [f'<tr class="jump" data-jump="{j}">' for j in jumps] if jumps is not None else ["<tr>"] * len(body)
    tr = "".join(tag + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for tag, row in zip(opens, body))
    return (f'<section id="{section_id}"><h2>{_e(title)}</h2>{extra}'
            f"<table><thead><tr>{th}</tr></thead><tbody>{tr}</tbody></table></section>")


def _gates(summary: RunSummary) -> str:
    rows = [[_e(f"Trial {t.trial}"), _e(g.name), _status_badge(g.passed), _e(g.message)]
            for t in summary.run.trials for g in t.gates]
    rows += [[run_gate_scope(g), _e(g.name), _status_badge(g.passed), _e(g.message)] for g in summary.run.gates]
    if not rows:
        return '<section id="gates"><h2>Gates</h2><p>No gates were set.</p></section>'
    return _table("gates", "Gates", ["Scope", "Gate", "Result", "Message"], rows)


def _baseline(diff: Mapping[str, Any] | None) -> str:
    """Changes against ``--baseline``: counts, then one row per changed sample (regressions first)."""
    if not diff:
        return ""
    from .baseline import KINDS

    counts = diff.get("counts") or {}  # a JSON report's keys are sorted: list them in KINDS' order
    summary = ", ".join(f"{counts[kind]} {kind.replace('_', ' ')}" for kind in KINDS if counts.get(kind)) or (
        "no changes")
    extra = (f'<p class="meta">Against <code>{_e(str(diff.get("path", "")))}</code>: '
             f'{_e(str(diff.get("matched_samples", 0)))} samples matched; {_e(summary)}.</p>'
             + _significance(diff.get("significance")))
    rows = []
    for c in diff.get("changes") or []:
        rows.append([_e(str(c.get("kind", ""))).replace("_", " "), _e(str(c.get("case", ""))),
                     _e(str(c.get("target", ""))), _e(f"{c.get('timestamp_s', '')}s"),
                     _e(str(c.get("baseline_status") or "–")), _e(str(c.get("status") or "–")),
                     _e(_value_text(c.get("baseline_observed"))), _e(_value_text(c.get("observed")))])
    if not rows:
        return f'<section id="baseline"><h2>Baseline</h2>{extra}</section>'
    return _table("baseline", "Changes against the baseline", ["Change", "Case", "Target", "Time", "Before",
                                                                "After", "Observed before", "Observed after"],
                  rows, extra)


def _significance(test: Any) -> str:
    """The verdict of the paired test, as the JSON report recorded it (reports read back may lack it)."""
    if not isinstance(test, Mapping):
        return ""
    try:
        ci = test["ci"]
        text = (f"{test['verdict']}: pass rate {float(test['delta_pass_rate']) * 100:+.1f} points "
                f"({float(test['level']) * 100:g}% CI {float(ci['low']) * 100:+.1f} to {float(ci['high']) * 100:+.1f}; "
                f"p = {float(test['p_value']):.3g}, one-sided, Holm; "
                f"{float(test['effective_pairs']):.0f} effective pairs)")
    except (KeyError, TypeError, ValueError):
        return ""
    return f'<p class="meta" id="significance">{_e(text)}</p>'


def _status_badge(passed: bool) -> str:
    return '<span class="s s-passed">pass</span>' if passed else '<span class="s s-failed">fail</span>'


def _count_cells(c: Counts, interval: PassRateInterval | None) -> list[str]:
    return [str(c.passed), str(c.failed), str(c.errors), str(c.ignored), _meter(c.pass_rate), _interval(interval)]


def _interval(interval: PassRateInterval | None) -> str:
    if interval is None:
        return "–"
    detail = (f"{interval.level * 100:g}% interval, {interval.effective_samples:.0f} effective of "
              f"{interval.samples} samples")
    bounds = f"{_pct(interval.low)} – {_pct(interval.high)}"
    return f'<span title="{_e(detail)}">{_e(bounds)}</span>'


def _trials(summary: RunSummary) -> str:
    rows = [[str(t.trial.trial), _status_badge(t.trial.success), *_count_cells(t.counts, t.pass_rate_ci),
             _e(f"{t.trial.duration_seconds:.2f} s"),
             _e("–" if t.throughput is None else f"{t.throughput:.1f}/s")] for t in summary.trials]
    if len(rows) > 1:
        rows.append(["<b>All</b>", _status_badge(summary.success), *_count_cells(summary.total, summary.pass_rate_ci),
                     _e(f"{summary.run.duration_seconds:.2f} s"), ""])
    return _table("trials", "Trials", ["Trial", "Gates", "Passed", "Failed", "Errors", "Ignored",
                                       "Pass rate", "Interval", "Duration", "Throughput"], rows)


def _groups(title: str, section_id: str, groups: Sequence[GroupSummary]) -> str:
    rows = []
    for g in groups:
        rates = ", ".join(_pct(r) for r in g.trial_rates) if len(g.trial_rates) > 1 else ""
        flaky = sum(1 for s in g.stability if s.flaky)
        rows.append([_e(g.display), *_count_cells(g.counts, g.pass_rate_ci), _e(rates), str(flaky)])
    return _table(section_id, title, ["Name", "Passed", "Failed", "Errors", "Ignored", "Pass rate",
                                      "Interval", "Per trial", "Flaky"], rows)


def _latency(summary: RunSummary) -> str:
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
        rows.append([_e(name), str(len(counts.durations)), _e(_seconds(counts.average_latency)),
                     *(_e(_seconds(v)) for v in (latency.p50, latency.p90, latency.p95, latency.max)),
                     *(_e(f"{usage[k]:g}") if k in usage else "–" for k in usage_keys)])
    batch = summary.timing_mode is TimingMode.BATCH
    extra = ('<p class="hint">Batch timing: each evaluate_many call\'s duration is divided among its '
             "samples.</p>" if batch else "")
    return _table("latency", "Latency and usage per target" if usage_keys else "Latency per target",
                  ["Target", "Timed", "Mean", "p50", "p90", "p95", "Max", *usage_keys], rows, extra)


def _stability(summary: RunSummary) -> str:
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
        seq = "".join(f'<span class="q q-{x.value}">{_LETTER[x]}</span>' for x in s.statuses)
        passed = s.statuses.count(Status.PASSED)
        rows.append([_e(r.case), _e(r.target), _e(f"{r.timestamp_s:g} s"), seq,
                     _pct(passed / s.evaluated if s.evaluated else None)])
    if not rows:
        return (f'<section id="stability"><h2>Stability over {summary.run.repeat} trials</h2>{extra}'
                "<p>No flaky samples.</p></section>")
    jumps = [row_of[s.first.key] for s in flaky[:MAX_FLAKY_ROWS]]
    return _table("stability", f"Stability over {summary.run.repeat} trials",
                  ["Case", "Target", "Time", "Trials (P/F/E/I)", "Pass rate"], rows,
                  extra + '<p class="hint">Click a sample to see its attempts.</p>', jumps)


def _samples_section(summary: RunSummary) -> str:
    def options(values: Sequence[tuple[int, str]]) -> str:
        return '<option value="">all</option>' + "".join(
            f'<option value="{i}">{_e(label)}</option>' for i, label in values)

    statuses = "".join(
        f'<label><input type="checkbox" class="f-status" value="{_RANK[s]}" checked> {s.value}</label>'
        for s in _STATUS_ORDER)
    trials = ""
    if summary.run.repeat > 1:
        trials = ('<label>Trial <select id="f-trial">'
                  + options([(t.trial, str(t.trial)) for t in summary.run.trials]) + "</select></label>")
    heads = [("status", "Status"), ("trial", "Trial"), ("case", "Case"), ("target", "Target"),
             ("time", "Time"), ("frame", "Frame"), ("expected", "Expected"), ("observed", "Observed value"),
             ("reason", "Reason"), ("thumb", "Frame image")]
    if summary.run.repeat < 2:
        heads.remove(("trial", "Trial"))
    th = "".join(f'<th data-sort="{k}" tabindex="0">{_e(v)}</th>' for k, v in heads)
    return ('<section id="samples"><h2>Samples</h2><div class="filters">'
            f'<fieldset><legend>Status</legend>{statuses}</fieldset>'
            '<label>Case <select id="f-case">'
            + options(list(enumerate(_case_names(summary)))) + "</select></label>"
            '<label>Target <select id="f-target">'
            + options([(i, t.display) for i, t in enumerate(summary.targets)]) + "</select></label>"
            f'{trials}<label>Search <input id="f-text" type="search" placeholder="expected, observed, reason">'
            '</label></div><p id="sample-count" class="hint"></p>'
            f'<table id="sample-table"><thead><tr>{th}</tr></thead><tbody id="sample-body"></tbody></table>'
            '<nav class="pager"><button id="page-prev" type="button">‹ Previous</button>'
            '<span id="page-label"></span><button id="page-next" type="button">Next ›</button></nav></section>')
