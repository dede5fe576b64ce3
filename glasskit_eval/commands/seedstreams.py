"""``seed`` for stream targets: an event without ``expect`` gets the emission matched in its window.

Each selected stream target with events to seed (those without ``expect``; all of them with
``--replace``) is fed once in replay; an event's proposal is the first emission inside its window
(earliest media time; at equal times the one the adapter returned first), after the target's
``field``. An event whose window holds no emission cannot be proposed, so the case files are left
unchanged, as for samples. Events are written in place (``expect`` after ``at``), through the same
conflict-checked write as samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..adapters.calls import StreamCaller
from ..cases.model import EventSpec, TargetSpec
from ..compare.values import MissingField, extract_field
from ..errors import EvalError
from ..evaluation.streams import StreamWork, run_streams
from ..plan.planning import CasePlan, Plan
from ..results import Emission, StreamResult
from ..support.timevalues import format_time


@dataclass(frozen=True)
class EventProposal:
    case: str
    target: str
    index: int
    value: Any


def events_to_seed(spec: TargetSpec, replace: bool) -> list[EventSpec]:
    assert spec.stream is not None
    return [e for e in spec.stream.events if replace or not e.has_expect]


def stream_targets(plan: Plan, replace: bool) -> list[tuple[CasePlan, tuple[TargetSpec, ...]]]:
    """Each case with the stream targets that have events to seed."""
    out = []
    for case_plan in plan.cases:
        targets = tuple(t for t in case_plan.streams if events_to_seed(t, replace))
        if targets:
            out.append((case_plan, targets))
    return out


def first_in_window(result: StreamResult, event: EventSpec) -> Emission | None:
    """The earliest emission in ``event``'s window (a hit before a repeat at the same time)."""
    start, end = event.span
    hits = [o.emission for o in result.events if o.emission is not None]
    inside = [e for e in [*hits, *result.repeats] if start <= e.time <= end]
    return min(inside, key=lambda e: e.time) if inside else None


def proposals(result: StreamResult, spec: TargetSpec, replace: bool) -> tuple[list[EventProposal], list[str]]:
    """The stream's proposals, and why the others could not be proposed."""
    assert spec.stream is not None
    found, problems = [], []
    for event in events_to_seed(spec, replace):
        where = f"{result.case}/{spec.id} event @ {format_time(event.at)}s"
        emission = first_in_window(result, event)
        if emission is None:
            problems.append(f"{where}: no emission in its window [{format_time(event.span[0])}, "
                            f"{format_time(event.span[1])}]s")
            continue
        try:
            value = extract_field(emission.value, spec.stream.field)
        except MissingField as exc:
            raise EvalError(f"{where}: the emission at {format_time(emission.time)}s lacks the configured "
                            f"field ({exc}); case files were left unchanged") from None
        found.append(EventProposal(result.case, spec.id, event.index, value))
    return found, problems


async def seed_streams(caller: StreamCaller, work: Sequence[tuple[CasePlan, tuple[TargetSpec, ...]]],
                       replace: bool, keep_going: bool) -> tuple[list[EventProposal], list[str]]:
    """Feed each case's streams to be seeded through ``caller`` (a lane's: the call policy applies)."""
    found: list[EventProposal] = []
    problems: list[str] = []
    for case_plan, targets in work:
        mine = CasePlan(case_plan.case, (), case_plan.video_path, case_plan.video, targets)
        results = await run_streams(StreamWork(mine, keep_going=keep_going), caller)
        for result, spec in zip(results, targets):
            if result.error is not None:
                problems.append(result.error)
                continue
            more, missing = proposals(result, spec, replace)
            found += more
            problems += missing
    return found, problems


def apply_events(found: Sequence[EventProposal], data: Any) -> Any:
    """Set each proposed event's ``expect`` (placed after ``at`` when the event has none yet)."""
    for p in found:
        events = data["targets"][p.target]["events"]
        raw = events[p.index]
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key == "expect":
                continue
            out[key] = value
            if key == "at":
                out["expect"] = p.value
        out.setdefault("expect", p.value)
        events[p.index] = out
    return data
