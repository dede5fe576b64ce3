"""``seed``: ask an adapter for the expectations a case file leaves out, and write them back.

Only omitted expectations in the selected scope are filled (all of it with
``replace``); ignored samples are never seeded. A block whose samples receive
different values keeps its expanded schedule: a range becomes consecutive
sub-ranges of equal values (same ``every_s``), an ``at`` list splits the same
way. The case file is rewritten only when every selected expectation succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..cases.model import Case, SampleBlock
from ..compare.values import MissingField, extract_field
from ..plan.schedule import ScheduledSample
from ..results import ErrorKind, Status
from ..support.jsonvalues import canonical_key
from ._judge import Verdict, plain_observation

#: How a seed result without the configured field starts its reason.
FIELD_ERROR = "field_error: "


def extract_judge(sample: ScheduledSample, observation: Any) -> Verdict:
    """Seed's judging step: the proposed expectation is the observation's configured field.

    An observation without that field is an adapter error (``field_error: ...``): there is
    nothing to propose, and a resume asks the adapter again.
    """
    observed = plain_observation(sample, observation)
    try:
        value = extract_field(observed, sample.field)
    except MissingField as exc:
        return Verdict(Status.ERROR, f"{FIELD_ERROR}{exc}", observed, error_kind=ErrorKind.ADAPTER)
    return Verdict(Status.PASSED, "proposed", observed, value)


def needs_seed(sample: ScheduledSample, replace: bool) -> bool:
    return not sample.ignored and (replace or not sample.block.has_expect)


@dataclass
class BlockEdit:
    """New sample blocks replacing one block of a target."""

    target_id: str
    block_index: int
    blocks: list[dict[str, Any]]
    split: bool


@dataclass
class CaseEdits:
    case: Case
    edits: list[BlockEdit] = field(default_factory=list)

    samples: int = 0


def _runs(values: Sequence[Any]) -> list[tuple[int, int]]:
    """Half-open index runs of consecutive equal JSON values."""
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or canonical_key(values[i]) != canonical_key(values[start]):
            runs.append((start, i))
            start = i
    return runs


def _number(value: Fraction) -> float:
    return float(value)


def _with_expect(raw: dict[str, Any], updates: dict[str, Any], value: Any) -> dict[str, Any]:
    """Copy ``raw`` with ``updates`` and ``expect`` set, keeping the author's key order."""
    out: dict[str, Any] = {}
    placed = False
    for key, old in raw.items():
        if key == "expect":
            out["expect"] = value
            placed = True
        else:
            out[key] = updates.get(key, old)
        if key in ("range", "at") and "expect" not in raw and not placed:
            out["expect"] = value
            placed = True
    if not placed:
        out["expect"] = value
    return out


def split_block(raw: dict[str, Any], block: SampleBlock, times: Sequence[Fraction],
                values: Sequence[Any]) -> list[dict[str, Any]]:
    """The blocks that replace ``block`` once its samples (at ``times``) got ``values``."""
    runs = _runs(values)
    if len(runs) == 1:
        return [_with_expect(raw, {}, values[0])]
    blocks = []
    if block.range is not None:
        raw_end = raw["range"][1]
        for n, (a, b) in enumerate(runs):
            start = raw["range"][0] if a == 0 else _number(times[a])
            end = raw_end if n == len(runs) - 1 else _number(times[b])
            blocks.append(_with_expect(raw, {"range": [start, end]}, values[a]))
        return blocks
    for a, b in runs:
        chosen = [_number(t) for t in times[a:b]]
        # One time is written as review writes it (`at: 1.0`), not as a one-element list.
        at_value: Any = chosen if len(chosen) > 1 else chosen[0]
        blocks.append(_with_expect(raw, {"at": at_value}, values[a]))
    return blocks


def plan_edits(case: Case, samples: Sequence[ScheduledSample],
               proposals: dict[int, Any]) -> CaseEdits:
    """Group proposed values (by sample index) into block replacements for one case."""
    doc_targets = case.document.value["targets"]
    by_block: dict[tuple[str, int], list[ScheduledSample]] = {}
    for sample in samples:
        if sample.sample_index in proposals:
            by_block.setdefault((sample.target.id, sample.block.index), []).append(sample)
    edits = CaseEdits(case, samples=len(proposals))
    for (target_id, block_index), members in by_block.items():
        members.sort(key=lambda s: s.time)
        raw = doc_targets[target_id]["samples"][block_index]
        values = [proposals[s.sample_index] for s in members]
        blocks = split_block(raw, members[0].block, [s.time for s in members], values)
        edits.edits.append(BlockEdit(target_id, block_index, blocks, split=len(blocks) > 1))
    edits.edits.sort(key=lambda e: (e.target_id, e.block_index))
    return edits
