"""What the adapter calls cost a run: latency percentiles, retries, timeouts and usage (pure).

Shared by the console and JSON reporters so both show the same figures from one
:class:`~glasskit_eval.summary.RunSummary`.
"""

from __future__ import annotations

from typing import Any

from ..statistics.intervals import PassRateInterval
from ..summary import Counts, GroupSummary, Latency, RunSummary


def latency_text(latency: Latency) -> str:
    return (f"p50 {_ms(latency.p50)} / p90 {_ms(latency.p90)} / p95 {_ms(latency.p95)} / "
            f"max {_ms(latency.max)}")


def usage_text(usage: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{key} {_number(value)}" for key, value in usage)


def console_lines(summary: RunSummary, *, latency: bool = True) -> list[str]:
    """Lines for the console summary; none for a run without retries, timeouts or usage.

    ``latency``: include the percentiles (a handful of samples makes them noise).
    """
    total = summary.total
    lines = []
    if latency and total.latency is not None:
        lines.append(f"Latency: {latency_text(total.latency)}")
    calls = total.call_latency
    if latency and calls is not None:
        lines.append(f"Batch call latency: {latency_text(calls)}")
    if total.retried:
        lines.append(f"Retried: {total.retried} samples")
    if total.timeouts:
        lines.append(f"Timeouts: {total.timeouts} samples")
    if total.usage:
        lines.append(f"Usage: {usage_text(total.usage)}")
    groups = [("target", g) for g in summary.targets] + [("case", g) for g in summary.cases]
    if len(groups) > 2:
        for kind, g in groups:
            parts = []
            if latency and g.counts.latency is not None:
                parts.append(latency_text(g.counts.latency))
            if g.counts.usage:
                parts.append(usage_text(g.counts.usage))
            if parts:
                lines.append(f"  {kind} {g.display}: " + "; ".join(parts))
    return lines


def counts_json(counts: Counts) -> dict[str, Any]:
    latency = counts.latency
    calls = counts.call_latency
    return {
        "batch_call_latency": calls.to_json() if calls is not None else None,
        "latency": latency.to_json() if latency is not None else None,
        "retried_samples": counts.retried,
        "timeout_errors": counts.timeouts,
        "usage": dict(counts.usage),
        # Only ``run --early-stop`` leaves samples without a call: other reports keep their keys.
        **({"not_evaluated": counts.not_evaluated} if counts.not_evaluated else {}),
    }


def groups_json(groups: tuple[GroupSummary, ...]) -> dict[str, Any]:
    return {g.name: {**counts_json(g.counts), "pass_rate_ci": interval_json(g.pass_rate_ci)} for g in groups}


def interval_json(interval: PassRateInterval | None) -> dict[str, Any] | None:
    return interval.to_json() if interval is not None else None


def interval_text(interval: PassRateInterval | None) -> str:
    """`` (95% CI 86.0-94.7%; 143 effective of 400 samples)``, or nothing without outcomes."""
    if interval is None:
        return ""
    return (f" ({interval.level * 100:g}% CI {interval.low * 100:.1f}-{interval.high * 100:.1f}%; "
            f"{interval.effective_samples:.0f} effective of {interval.samples} samples)")


def points(drop: float) -> str:
    """A pass-rate difference in percentage points, as people say it."""
    return f"{drop * 100:.1f} points"


def detectable_text(summary: RunSummary) -> str | None:
    """What size of drop this eval can see, or None when there is nothing to say."""
    if summary.pass_rate_ci is None:
        return None
    if summary.minimum_detectable_drop is None:
        return (f"Smallest detectable drop: none (too few effective samples to see a pass-rate drop with "
                f"80% power at alpha {summary.alpha:g})")
    return (f"Smallest detectable drop: {points(summary.minimum_detectable_drop)} (80% power at alpha "
            f"{summary.alpha:g}, against a rerun)")


def _ms(value: float) -> str:
    return f"{value * 1000:.1f}ms" if value < 10 else f"{value:.2f}s"


def _number(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.6g}"
