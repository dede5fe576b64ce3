"""What ``run --early-stop`` decided, for the console and the JSON report (renders, decides nothing).

Console: one ``Decided early: PASS eval_min_pass_rate >= 90% after 212 of 2,400 samples (95%
anytime-valid bound 93.1%)`` line per gate decided before its last sample, then the calls saved
and, when the adapter reports a ``cost``, the money saved at the evaluated samples' mean cost.
JSON: the top-level ``early_stop`` block.
"""

from __future__ import annotations

from typing import Any, TextIO

from ..results import EarlyStop, GateDecision, TrialResult
from ..summary import Counts, RunSummary


def _stopped(summary: RunSummary) -> list[tuple[TrialResult, EarlyStop]]:
    return [(t, t.early_stop) for t in summary.run.trials if t.early_stop is not None]


def decision_line(d: GateDecision, alpha: float) -> str:
    """``Decided early: PASS eval_min_pass_rate >= 90% after 212 of 2,400 samples (95% anytime-valid bound 93.1%)``.

    Also the message of the gate an early decision stands in for (``gates.decided_gates``).
    """
    verdict = d.verdict.upper()
    after = f"after {d.after:,} of {d.planned:,} samples"
    if d.cached:
        after += f", {d.cached:,} of them cached"
    if d.name.endswith("_max_failures"):
        return f"Decided early: {verdict} {d.name} <= {d.minimum:g} {after} ({d.low:g} failures seen)"
    bound = d.low if d.verdict == "pass" else d.high
    return (f"Decided early: {verdict} {d.name} >= {d.minimum * 100:.4g}% {after} "
            f"({(1 - alpha) * 100:.4g}% anytime-valid bound {bound * 100:.1f}%)")


def decided_lines(summary: RunSummary) -> list[str]:
    """One line per gate decided early (prefixed ``[trial/trials]`` with ``--repeat``)."""
    lines: list[str] = []
    trials = summary.run.repeat
    for trial, record in _stopped(summary):
        prefix = f"[{trial.trial}/{trials}] " if trials > 1 else ""
        lines.extend(prefix + decision_line(d, record.alpha) for d in record.gates if d.early)
    return lines


def savings(summary: RunSummary) -> tuple[int, int, float | None]:
    """Calls not made, calls planned, and the money not spent (None without a reported cost)."""
    stopped = _stopped(summary)
    planned = sum(r.samples_planned for _t, r in stopped)
    saved = sum(r.samples_planned - r.samples_evaluated for _t, r in stopped)
    counts = Counts.of(x for t, _r in stopped for x in t.results)
    cost = counts.cost
    money = cost / counts.evaluated * saved if cost is not None and counts.evaluated else None
    return saved, planned, money


def print_early_stop(summary: RunSummary, out: TextIO) -> None:
    if not _stopped(summary):
        return
    print(file=out)
    for line in decided_lines(summary):
        print(line, file=out)
    saved, planned, money = savings(summary)
    share = f" ({saved / planned:.0%})" if planned else ""
    spent = f"; about {money:.6g} of cost saved at the evaluated samples' mean" if money is not None else ""
    cached = sum(r.samples_cached for _t, r in _stopped(summary))
    ahead = f"; {cached:,} samples read from the cache before any call" if cached else ""
    print(f"Early stop: {saved:,} of {planned:,} adapter calls saved{share}{spent}{ahead}", file=out)


def verdict_tail(summary: RunSummary) -> str:
    lines = decided_lines(summary)
    return "; " + "; ".join(lines) if lines else ""


def early_stop_json(summary: RunSummary) -> dict[str, Any] | None:
    stopped = _stopped(summary)
    if not stopped:
        return None
    first = stopped[0][1]
    saved, planned, money = savings(summary)
    block: dict[str, Any] = {
        "alpha": first.alpha, "block_s": first.block_s, "calls_saved": saved, "cost_saved": money,
        "gates": [d.to_json() | ({"trial": t.trial} if summary.run.repeat > 1 else {})
                  for t, r in stopped for d in r.gates],
        "samples_cached": sum(r.samples_cached for _t, r in stopped),
        "samples_evaluated": sum(r.samples_evaluated for _t, r in stopped),
        "samples_planned": planned, "seed": first.seed,
    }
    return block
