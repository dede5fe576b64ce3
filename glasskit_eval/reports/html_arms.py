"""The HTML report's arms: the side-by-side table, and the flips with both arms' frames.

Rendered from the run's :class:`~glasskit_eval.arms.compare.ArmsReport` (computed once, in
``arms.compare``) and the run's results; the pictures are the ones the run kept as each arm saw its
frame (:func:`~.thumbnails.pixel_key`: a perturbation arm's perturbed pixels), never decoded again.
Every value goes through :func:`esc`; pictures are ``data:`` URIs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..arms.compare import ArmComparison, ArmsReport, Flip
from ..results import SampleResult, Status
from ..statistics.paired import NOISE_FROM_REPEATS
from ..summary import RunSummary
from .html_images import data_uri
from .html_text import clip_time, esc, pct, seconds, value_text
from .thumbnails import ThumbKey, pixel_key

#: Flips shown with their frames per arm; the JSON report lists every one.
MAX_FLIP_CARDS = 40
#: Longest whole observation shown beside a flip's frame.
MAX_FLIP_OBSERVATION = 1500

FlipKey = tuple[str, int, str, str, float]


def arms_table(arms: ArmsReport) -> str:
    """One row per arm, the control first: pass rate and interval, latency, cost, the paired comparison."""
    cost = any(s.counts.cost is not None for s in arms.summaries.values())
    level = next((s.interval.level for s in arms.summaries.values() if s.interval is not None), 0.95)
    head = ["Arm", "Pass rate", f"{level * 100:g}% interval", f"Δ vs {arms.control}", "Δ interval",
            "p (Holm)", "Significant", "Flips", "Latency p50", "Latency p95", *(["Cost"] if cost else []), "Pareto"]
    rows = []
    for name in arms.names:
        s = arms.summaries[name]
        latency = s.counts.latency
        interval = f"{pct(s.interval.low)} – {pct(s.interval.high)}" if s.interval is not None else "–"
        if name == arms.control:
            versus = ["control", "", "", "", ""]
        else:
            versus = _versus(arms.overall(name))
        cells = [f'<span class="arm-name">{esc(name)}</span>', esc(pct(s.pass_rate)), esc(interval), *versus,
                 esc(seconds(latency.p50 if latency else None)), esc(seconds(latency.p95 if latency else None))]
        if cost:
            cells.append(esc("–" if s.counts.cost is None else f"{s.counts.cost:.4g}"))
        cells.append('<span class="pareto" title="on the Pareto front">★ yes</span>' if name in arms.pareto else "")
        rows.append(f'<tr data-arm="{esc(name)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    return ('<section id="arms"><h2>Arms side by side</h2><p class="hint">The same frames for every arm; each '
            f"arm compared with <code>{esc(arms.control)}</code> on the samples both judged (paired; p-values "
            f"Holm-adjusted across arms; {_noise(arms)}). Pareto: no other arm matches or beats it on pass rate, "
            "p95 latency and cost while beating it on one.</p>"
            f'<div class="scroll"><table id="arms-table"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}'
            f"</tbody></table></div>{_streams_table(arms)}</section>")


def _noise(arms: ArmsReport) -> str:
    if arms.noise_source == NOISE_FROM_REPEATS:
        return "noise learnt from each sample's repeated trials"
    return "noise learnt from the arm-minus-control differences: a drop confined to one stretch can hide itself"


def _streams_table(arms: ArmsReport) -> str:
    """Each arm against the control per stream target (empty without stream targets)."""
    if not arms.streams:
        return ""
    head = ["Arm", "Stream", "Recall", f"Δ vs {arms.control}", "FA/min", "Δ FA/min", "Latency p95", "Δ p95",
            f"Detected by {arms.control} only", "By the arm only", "p"]
    rows = []
    for c in arms.streams:
        mine = c.arm_figures
        recall, per_min, p95 = mine.recall, mine.false_alarms_per_min, mine.latency_p95
        cells = [f'<span class="arm-name">{esc(c.arm)}</span>', esc(f"{c.case}/{c.target}"),
                 esc(pct(None if recall is None else float(recall))),
                 esc("–" if c.delta_recall is None else f"{c.delta_recall * 100:+.1f} pts"),
                 esc("–" if per_min is None else f"{float(per_min):.2f}"),
                 esc("–" if c.delta_false_alarms_per_min is None else f"{c.delta_false_alarms_per_min:+.2f}"),
                 esc(seconds(None if p95 is None else float(p95))),
                 esc("–" if c.delta_latency_p95_s is None else f"{c.delta_latency_p95_s * 1000:+.0f} ms"),
                 esc(str(c.control_only)), esc(str(c.arm_only)), esc(f"{c.p_value:.3g}")]
        rows.append(f'<tr data-arm="{esc(c.arm)}">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    return ('<h3>Streams by arm</h3><p class="hint">Each arm fed the same frames as its own stream; compared with '
            f"<code>{esc(arms.control)}</code> on the same events (paired; p: exact McNemar on the events one "
            "detected and the other missed).</p>"
            f'<div class="scroll"><table id="arms-streams-table"><thead><tr>{th}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _versus(comparison: ArmComparison | None) -> list[str]:
    test = comparison.test if comparison is not None else None
    flips = str(len(comparison.flips)) if comparison is not None else "–"
    if test is None:
        return ["–", "–", "–", "–", esc(flips)]
    return [esc(f"{test.delta_pass_rate * 100:+.1f} pts"),
            esc(f"{test.low * 100:+.1f} – {test.high * 100:+.1f} pts"),
            esc(f"{test.p_value:.3g}"), "yes" if test.significant else "no", esc(flips)]


def flips_section(summary: RunSummary, arms: ArmsReport, thumbnails: Mapping[ThumbKey, bytes],
                  variants: Mapping[str, str]) -> str:
    """Per arm, the samples passing in one of it and the control and not in the other, both frames side by side."""
    found = {_key(r, n): r for n, t in enumerate(summary.run.trials, 1) for r in t.results if r.arm is not None}
    parts = []
    for name in arms.names:
        comparison = arms.overall(name)
        if name == arms.control or comparison is None or not comparison.flips:
            continue
        cards = [_card(flip, arms.control, name, found, thumbnails, variants, arms.repeat > 1)
                 for flip in comparison.flips[:MAX_FLIP_CARDS]]
        more = len(comparison.flips) - MAX_FLIP_CARDS
        rest = (f'<p class="hint">… and {more} more (JSON report: <code>arm_comparisons</code>).</p>'
                if more > 0 else "")
        parts.append(f'<div class="flip-arm" data-arm="{esc(name)}"><h3>{esc(arms.control)} → {esc(name)} '
                     f'<span class="hint">({len(comparison.flips)})</span></h3>'
                     f'<ol class="flip-list">{"".join(cards)}</ol>{rest}</div>')
    if not parts:
        return ""
    return ('<section id="arm-flips"><h2>Flips</h2><p class="hint">Samples that pass in one arm and fail or error '
            "in the other, with the frame each arm was given (a perturbation arm's perturbed pixels) and what it "
            f"observed.</p>{''.join(parts)}</section>")


def _key(r: SampleResult, trial: int) -> FlipKey:
    return (r.arm or "", trial, r.case, r.target, r.timestamp_s)


def _card(flip: Flip, control: str, arm: str, found: Mapping[FlipKey, SampleResult],
          thumbnails: Mapping[ThumbKey, bytes], variants: Mapping[str, str], trials: bool) -> str:
    sides = []
    frame = None
    for name, status in ((control, flip.control_status), (arm, flip.arm_status)):
        result = found.get((name, flip.trial, flip.case, flip.target, flip.timestamp_s))
        frame = result.frame_index if result is not None and result.frame_index is not None else frame
        sides.append(_side(name, status, result, thumbnails, variants))
    where = (f"{flip.case} / {flip.target} at {clip_time(flip.timestamp_s)}"
             + (f" (frame {frame})" if frame is not None else "") + (f" · trial {flip.trial}" if trials else ""))
    return f'<li class="flip"><div class="flip-where">{esc(where)}</div><div class="flip-pair">{"".join(sides)}</div></li>'


def _side(arm: str, status: Status, result: SampleResult | None, thumbnails: Mapping[ThumbKey, bytes],
          variants: Mapping[str, str]) -> str:
    jpeg = None
    if result is not None and result.frame_index is not None:
        jpeg = thumbnails.get(pixel_key(result.case, result.frame_index, variants.get(arm, "")))
    variant = variants.get(arm, "")
    alt = f"frame as {arm} saw it" + (f" ({variant})" if variant else "")
    image = (f'<img class="flip-img" src="{data_uri(jpeg)}" alt="{esc(alt)}">' if jpeg is not None
             else '<div class="flip-img none">no frame kept</div>')
    observed = value_text(result.observed_value) if result is not None else ""
    whole = _observation(result)
    return (f'<figure class="flip-side" data-arm="{esc(arm)}">{image}<figcaption><b>{esc(arm)}</b> '
            f'<span class="s s-{status.value}">{esc(status.value)}</span>'
            + (f'<div class="flip-value">observed: <code>{esc(observed)}</code></div>' if observed else "")
            + (f'<pre class="flip-observation">{esc(whole)}</pre>' if whole else "")
            + "</figcaption></figure>")


def _observation(result: SampleResult | None) -> str:
    if result is None or result.observed is None:
        return result.reason if result is not None and result.status is Status.ERROR else ""
    observed: Any = result.observed
    text = observed if isinstance(observed, str) else json.dumps(observed, ensure_ascii=False, sort_keys=True,
                                                                 default=str)
    return text if len(text) <= MAX_FLIP_OBSERVATION else text[:MAX_FLIP_OBSERVATION] + "…"

