"""The HTML report: one self-contained file rendered from a RunSummary (sans-IO).

:func:`render_html` is a pure function from a summary (plus thumbnails and a few options) to text;
the callers (``run --html``, ``report --html``) do the reading and writing. The page works from
``file://`` with no network: CSS and JS are inlined from package data, images are data URIs,
and a Content-Security-Policy allows nothing else (scripts and styles by hash, images from
``data:`` only). Observed values are adapter output and treated as hostile: every value in the
markup goes through :func:`html.escape`, and the sample data travels as JSON in a data block with
``<``, ``>`` and ``&`` escaped, which the page's script only ever puts into ``textContent``.

The page leads with the evidence: the verdict and gates, then the failed and errored samples
(each opens a lightbox with its frame at full resolution, and has an anchor to link to), then the
per-run tables, the timelines and the table of every attempt.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..results import SampleResult, Stability, Status
from ..summary import RunSummary
from .console import shown_reason
from .html_images import allocate
from .html_streams import stream_data, stream_keys, stream_section
from .html_tables import baseline, gates, groups, jump_rows, latency, stability, trials
from .html_text import LETTER, RANK, STATUS_ORDER, clip, esc, pct, seconds, value_text
from .thumbnails import DEFAULT_BUDGET_BYTES, ThumbKey, arm_variants, pixel_key, wants_thumbnail

if TYPE_CHECKING:
    from ..arms.compare import ArmsReport
    from ..labels.consensus import LabelCheck

#: Longest whole observation put in the lightbox per sample; the JSON report has the rest.
MAX_OBSERVATION = 20000

_RANGE = re.compile(r"range \[([-+0-9.eE]+), ([-+0-9.eE]+)\)")
#: Characters an anchor keeps as they are; any other is written ``~`` and its UTF-8 bytes in hex.
_PLAIN = re.compile(r"[A-Za-z0-9_.-]")


@dataclass(frozen=True)
class HtmlOptions:
    #: JPEG thumbnails by (case, frame index).
    thumbnails: Mapping[ThumbKey, bytes] = field(default_factory=dict)
    #: JPEG frames at full resolution by (case, frame index), for the lightbox.
    frames: Mapping[ThumbKey, bytes] = field(default_factory=dict)
    #: Bytes of every embedded image: thumbnails first, then full frames (see ``html_images``).
    budget_bytes: int = DEFAULT_BUDGET_BYTES
    #: Frames that wanted a thumbnail after the budget was spent while collecting them.
    over_budget: Collection[ThumbKey] = ()
    #: Clip durations in seconds by case name (timeline scale); else the last sample's time.
    durations: Mapping[str, float] = field(default_factory=dict)
    #: By stream (case, target, trial): the frame index of each missed event, by event index.
    stream_misses: Mapping[tuple[str, str, int, str | None], Mapping[int, int]] = field(default_factory=dict)
    #: By stream: the frame index of each false alarm whose frame the run kept, by emission time.
    stream_alarms: Mapping[tuple[str, str, int, str | None], Mapping[Fraction, int]] = field(default_factory=dict)
    #: Directory the page will be written to: artifact links are made relative to it.
    output_dir: str | None = None
    #: Report files the summary was read from (``report``); empty for a run.
    sources: tuple[str, ...] = ()
    #: Lines shown under the header (for example frames that could not be decoded).
    notes: tuple[str, ...] = ()
    #: The comparison with ``--baseline`` in its JSON report form (``BaselineDiff.to_json``), if any.
    baseline: Mapping[str, Any] | None = None
    #: The eval directory as the reader will type it (review commands, the header); None: the run's.
    #: The run records an absolute path, which on a CI runner means nothing to whoever reads the page.
    eval_dir: str | None = None
    #: A run with arms: the arms compared (the side-by-side table and the flips); None without arms.
    arms: ArmsReport | None = None
    #: A run with repeats or arms: suspect labels from the votes, and the command that reviews them.
    labels: LabelCheck | None = None
    labels_review: str | None = None

    @property
    def variants(self) -> dict[str, str]:
        """Arm name -> the perturbation its frames went through ("" for plain pixels)."""
        return arm_variants(self.arms.specs) if self.arms is not None else {}


@dataclass(frozen=True)
class Assets:
    css: str
    js: str

    @classmethod
    def packaged(cls) -> Assets:
        from ..support.resources import read_text

        # One script (one hash in the policy): the stream timelines' part follows the main one.
        return cls(read_text("assets", "html_report.css"),
                   read_text("assets", "html_report.js") + read_text("assets", "html_report_streams.js"))


def render_html(summary: RunSummary, options: HtmlOptions | None = None, assets: Assets | None = None) -> str:
    options = options or HtmlOptions()
    assets = assets or Assets.packaged()
    run = summary.run
    eval_dir = options.eval_dir if options.eval_dir is not None else run.eval_dir
    data = _rows(summary, options, eval_dir)
    data.update({"cases": list(_case_names(summary)), "targets": [t.name for t in summary.targets],
                 "targetDisplay": [t.display for t in summary.targets], "repeat": run.repeat,
                 "anchors": anchors(summary), "timelines": _timelines(summary, options),
                 "arms": list(options.arms.names) if options.arms is not None else []})
    verdict = "PASSED" if summary.success else "FAILED"
    title = f"glasskit_eval: {verdict} · {eval_dir}"
    body = "".join([
        _header(summary, verdict, options, eval_dir, data.pop("notes")),
        gates(summary), *_arms_sections(summary, options), _failures_section(summary), _labels_section(options),
        stream_section(summary),
        trials(summary), groups("By target", "targets", summary.targets),
        groups("By case", "cases", summary.cases), baseline(options.baseline), latency(summary),
        stability(summary),
        '<section id="timelines"><h2>Timelines</h2><p class="hint">One strip per target over the '
        "clip: marks are samples, bands are ranges. Hover for the sample, click to jump to its row."
        '</p><div id="timeline-root"></div></section>',
        _samples_section(summary, options.arms.names if options.arms is not None else ()), _LIGHTBOX, '<div id="tip" role="tooltip" hidden></div>',
    ])
    css, js = assets.css, assets.js
    csp = ("default-src 'none'; img-src data:; "
           f"style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; base-uri 'none'; form-action 'none'")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{css}</style></head>"
        f'<body class="{"ok" if summary.success else "bad"}">{body}'
        f'<script type="application/json" id="report-data">{_json_block(data)}</script>'
        f"<script>{js}</script></body></html>\n")


_LIGHTBOX = (
    '<div id="lightbox" role="dialog" aria-modal="true" aria-labelledby="lb-title" hidden>'
    '<div class="lb-panel"><div class="lb-bar"><h2 id="lb-title"></h2><span id="lb-count" class="hint"></span>'
    '<span class="lb-nav"><button type="button" id="lb-prev" aria-label="Previous failure">‹ Prev</button>'
    '<button type="button" id="lb-next" aria-label="Next failure">Next ›</button>'
    '<button type="button" id="lb-close" aria-label="Close">✕</button></span></div>'
    '<div class="lb-body"><figure><img id="lightbox-img" alt=""><figcaption id="lightbox-caption"></figcaption>'
    '<ol id="lb-strip" class="strip lb-strip" hidden></ol></figure><div class="lb-info"><h3>Reason</h3><p id="lb-reason" class="lb-text"></p>'
    '<h3>Expected</h3><pre id="lb-expected" class="lb-pre"></pre>'
    '<h3>Observation</h3><pre id="lb-observation" class="lb-pre"></pre>'
    '<h3>Review this sample</h3><div class="cmd-box"><pre id="lb-cmd" class="cmd"></pre>'
    '<button type="button" id="lb-copy">Copy</button></div><p class="hint"><a id="lb-link" href="#">Link to '
    "this sample</a></p></div></div></div></div>")


def _arms_sections(summary: RunSummary, options: HtmlOptions) -> list[str]:
    if options.arms is None:
        return []
    from .html_arms import arms_table, flips_section

    return [arms_table(options.arms), flips_section(summary, options.arms, options.thumbnails, options.variants)]


def _labels_section(options: HtmlOptions) -> str:
    if options.labels is None:
        return ""
    from .labels import labels_section

    return labels_section(options.labels, options.thumbnails, options.labels_review)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _json_block(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # Nothing in a data block may close it or open a comment; JSON allows these escapes anywhere.
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


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


def anchor_part(name: str, *, dashes: bool = True) -> str:
    """``name`` as anchor text: letters, digits, ``_ . -`` kept, anything else ``~`` and its hex bytes."""
    return "".join(c if _PLAIN.fullmatch(c) and (dashes or c != "-")
                   else "".join(f"~{b:02x}" for b in c.encode("utf-8")) for c in name)


def sample_anchor(case: str, target: str, index: int, *, dashes: bool = True) -> str:
    """The id a logical sample is linked by, ``sample-<case>-<target>-<index>``; stable across renders."""
    return f"sample-{anchor_part(case, dashes=dashes)}-{anchor_part(target, dashes=dashes)}-{index}"


def anchors(summary: RunSummary) -> dict[str, int]:
    """Anchor id -> the row it opens (the sample's first failing attempt, else its first attempt).

    A dash in a name reads as the separator, so two samples could share an id (case ``a-b``
    target ``c`` and case ``a`` target ``b-c``): the second spells its dashes ``~2d``.
    """
    out: dict[str, int] = {}
    for (case, target, index), row in sorted(jump_rows(summary).items(), key=lambda item: item[1]):
        anchor = sample_anchor(case, target, index)
        if anchor in out:
            anchor = sample_anchor(case, target, index, dashes=False)
        out[anchor] = row
    return out


def _observation(r: SampleResult) -> str:
    """The adapter's whole observation (not only the compared field), pretty when it is JSON."""
    if r.observed is None:
        return ""
    if isinstance(r.observed, str):
        text = r.observed
    else:
        text = json.dumps(r.observed, ensure_ascii=False, sort_keys=True, indent=2, default=str)
    if len(text) <= MAX_OBSERVATION:
        return text
    return f"{text[:MAX_OBSERVATION]}… ({len(text) - MAX_OBSERVATION} more characters in the JSON report)"


def _rows(summary: RunSummary, options: HtmlOptions, eval_dir: str) -> dict[str, Any]:
    """One row per attempt, the embedded images and their notes; failures get images first, in page order.

    A row: trial, case, target, sample index, time, frame, status rank, expected, observed value,
    reason, thumbnail, review command, full frame, whole observation (the last three for failures),
    arm (its index in ``arms``; null without arms), filmstrip (a failed clip sample's; see
    ``html_images.Images.strip_of``).
    """
    cases = {name: i for i, name in enumerate(_case_names(summary))}
    targets = {t.name: i for i, t in enumerate(summary.targets)}
    trial_of = [t.trial for t in summary.run.trials for _ in t.results]
    attempts = [r for t in summary.run.trials for r in t.results]
    failing = sorted((i for i, r in enumerate(attempts) if wants_thumbnail(r)),
                     key=lambda i: (RANK[attempts[i].status], cases[attempts[i].case],
                                    targets[attempts[i].target], attempts[i].timestamp_s))
    variants = options.variants

    def key_of(r: SampleResult) -> ThumbKey:
        return pixel_key(r.case, r.frame_index or 0, variants.get(r.arm or "", ""))

    images = allocate(attempts, failing, thumbnails=options.thumbnails, frames=options.frames,
                      budget_bytes=options.budget_bytes, over_budget=options.over_budget,
                      output_dir=options.output_dir, key_of=key_of,
                      extra=stream_keys(summary, options.stream_misses, options.stream_alarms))
    arm_index = {name: i for i, name in enumerate(options.arms.names)} if options.arms is not None else {}
    rows = []
    for i, r in enumerate(attempts):
        failed = r.status in (Status.FAILED, Status.ERROR)
        rows.append([trial_of[i], cases[r.case], targets[r.target], r.sample_index, r.timestamp_s, r.frame_index,
                     RANK[r.status], value_text(r.expected), value_text(r.observed_value),
                     clip(shown_reason(r)), images.thumb_of.get(i), review_command(eval_dir, r) if failed else None,
                     images.frame_of.get(i), _observation(r) if failed else None,
                     arm_index.get(r.arm) if r.arm is not None else None, images.strip_of.get(i)])
    streams = stream_data(summary, durations=options.durations, misses=options.stream_misses,
                          alarms=options.stream_alarms, thumb_of=images.extra_of)
    return {"rows": rows, "thumbs": images.thumbs, "frames": images.frames, "notes": images.notes,
            "streams": streams}


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
            worst = RANK[_worst(s)]
            strip["marks"].append([r.timestamp_s, worst, row_of[r.key], "".join(LETTER[x] for x in s.statuses)])
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
    return min(s.statuses, key=lambda x: RANK[x])


def _header(summary: RunSummary, verdict: str, options: HtmlOptions, eval_dir: str, thumb_notes: list[str]) -> str:
    run = summary.run
    total = summary.total
    first = summary.first
    stats = [("Pass rate (attempts)", pct(total.pass_rate)),
             ("Passed", total.passed), ("Failed", total.failed), ("Errors", total.errors),
             ("Ignored", total.ignored), ("Samples", first.evaluated + first.ignored),
             ("Trials", len(run.trials)), ("Duration", seconds(run.duration_seconds))]
    if total.not_evaluated:
        from .early_stop import decided_lines

        stats.insert(5, ("Not evaluated (decided early)", total.not_evaluated))
        thumb_notes = [*decided_lines(summary), *thumb_notes]
    interval = summary.pass_rate_ci
    if interval is not None:
        stats.insert(1, (f"{interval.level * 100:g}% interval", f"{pct(interval.low)} – {pct(interval.high)} "
                         f"({interval.effective_samples:.0f} effective of {interval.samples} samples)"))
    if len(summary.trial_rates) > 1:
        rates = summary.trial_rates
        stats.insert(1, ("Trial pass rates", f"{pct(min(rates))} – {pct(max(rates))}"))
    items = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in stats)
    source = ""
    if options.sources:
        source = "<p class=\"meta\">Rendered from " + ", ".join(
            f"<code>{esc(s)}</code>" for s in options.sources) + "</p>"
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in (*options.notes, *thumb_notes))
    failed = summary.failed_gates()
    gates = "" if not failed else "<ul class=\"failed-gates\">" + "".join(
        f"<li>{esc(scope)}: {esc(g.message)}</li>" for scope, g in failed) + "</ul>"
    return (f'<header class="top"><h1><span class="verdict" id="verdict">{verdict}</span> '
            f'glasskit_eval report</h1><p class="meta">Eval directory <code>{esc(eval_dir)}</code>'
            f"</p>{source}<dl class=\"stats\">{items}</dl>{gates}{notes}</header>")


def _samples_section(summary: RunSummary, arms: Sequence[str] = ()) -> str:
    def options(values: Sequence[tuple[int, str]]) -> str:
        return '<option value="">all</option>' + "".join(
            f'<option value="{i}">{esc(label)}</option>' for i, label in values)

    statuses = "".join(
        f'<label><input type="checkbox" class="f-status" value="{RANK[s]}" checked> {s.value}</label>'
        for s in STATUS_ORDER if s is not Status.NOT_EVALUATED or summary.total.not_evaluated)
    trials = ""
    if summary.run.repeat > 1:
        trials = ('<label>Trial <select id="f-trial">'
                  + options([(t.trial, str(t.trial)) for t in summary.run.trials]) + "</select></label>")
    heads = [("status", "Status"), ("trial", "Trial"), ("case", "Case"), ("target", "Target"),
             ("time", "Time"), ("frame", "Frame"), ("expected", "Expected"), ("observed", "Observed value"),
             ("reason", "Reason"), ("thumb", "Frame image")]
    if summary.run.repeat < 2:
        heads.remove(("trial", "Trial"))
    arm_filter = ""
    if arms:
        heads.insert(1, ("arm", "Arm"))
        arm_filter = '<label>Arm <select id="f-arm">' + options(list(enumerate(arms))) + "</select></label>"
    th = "".join(f'<th data-sort="{k}" tabindex="0">{esc(v)}</th>' for k, v in heads)
    return ('<section id="samples"><h2>Samples</h2><div class="filters">'
            f'<fieldset><legend>Status</legend>{statuses}</fieldset>'
            '<label>Case <select id="f-case">'
            + options(list(enumerate(_case_names(summary)))) + "</select></label>"
            '<label>Target <select id="f-target">'
            + options([(i, t.display) for i, t in enumerate(summary.targets)]) + "</select></label>"
            f'{arm_filter}{trials}<label>Search <input id="f-text" type="search" placeholder="expected, observed, reason">'
            '</label></div><p id="sample-count" class="hint"></p>'
            f'<div class="scroll"><table id="sample-table"><thead><tr>{th}</tr></thead>'
            '<tbody id="sample-body"></tbody></table></div>'
            '<nav class="pager"><button id="page-prev" type="button">‹ Previous</button>'
            '<span id="page-label"></span><button id="page-next" type="button">Next ›</button></nav></section>')


def _failures_section(summary: RunSummary) -> str:
    """The failed and errored attempts as cards (drawn by the page's script from the data block)."""
    total = summary.total
    bad = total.failed + total.errors
    if not bad:
        return ""
    parts = [f"{n} {word}" for n, word in ((total.errors, "errored"), (total.failed, "failed")) if n]
    return (f'<section id="failures"><h2>Failed samples <span class="hint">({esc(", ".join(parts))})</span></h2>'
            '<p class="hint">Errors first, then failures, by case, target and time. Open one for its frame at '
            "full resolution, the whole observation and the command to review it; ← → step through them.</p>"
            '<ol id="failure-list"></ol><p><button type="button" id="failure-more" hidden></button></p></section>')
