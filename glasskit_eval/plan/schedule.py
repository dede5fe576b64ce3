"""The expanded sample schedule and the filters commands apply to it.

Sample indexes are case-local and assigned before any filter, in declaration
order (targets, then blocks, then times), so a sample keeps its index whether a
command selects all of a case or one timestamp of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..cases.checks import unknown_target_problem
from ..cases.model import Case, SampleBlock, TargetSpec, block_times
from ..compare.modes import CompareConfig, infer_mode
from ..errors import Problem, UsageError, ValidationError
from ..support.timevalues import format_time, same_time_key

if TYPE_CHECKING:
    from .clips import Clip


@dataclass(frozen=True, slots=True)
class ScheduledSample:
    """One sample to evaluate: a time of one block of one target of a case (with its clip, once planned)."""

    case: Case
    target: TargetSpec
    block: SampleBlock
    sample_index: int
    time: Fraction
    #: The clip's frames, once planning has read the video (None: a single-frame sample, or not planned).
    clip: Clip | None = None

    def with_clip(self, clip: Clip | None) -> ScheduledSample:
        return ScheduledSample(self.case, self.target, self.block, self.sample_index, self.time, clip)

    @property
    def timestamp_s(self) -> float:
        return float(self.time)

    @property
    def ignored(self) -> bool:
        return self.block.ignore is not None

    @property
    def is_draft(self) -> bool:
        return not self.block.has_expect and not self.ignored

    @property
    def expect(self) -> Any:
        return self.block.expect

    @property
    def field(self) -> str | None:
        return self.block.field

    @property
    def compare(self) -> CompareConfig | None:
        """The comparison in force: declared or inherited, else inferred from ``expect``."""
        if self.block.compare is not None:
            return self.block.compare
        if not self.block.has_expect:
            return None
        return CompareConfig(mode=infer_mode(self.block.expect))

    def location(self) -> str:
        return f"{self.case.name} / {self.target.id} @ {format_time(self.time)}s"


@dataclass(frozen=True, slots=True)
class Filters:
    """Which samples a command selects: ``--case``, ``--targets``, ``--at``, ``--from`` and ``--until``."""

    case: str | None = None
    targets: tuple[str, ...] = ()
    at: tuple[Fraction, ...] = ()
    from_s: Fraction | None = None
    until_s: Fraction | None = None

    def check(self) -> None:
        """Option rules that do not need the eval directory."""
        if (self.at or self.from_s is not None or self.until_s is not None) and self.case is None:
            raise UsageError("--at, --from and --until select times within one case; add --case")
        if self.at and (self.from_s is not None or self.until_s is not None):
            raise UsageError("--at cannot be combined with --from or --until")
        for value, name in ((self.from_s, "--from"), (self.until_s, "--until"), *((t, "--at") for t in self.at)):
            if value is not None and value < 0:
                raise UsageError(f"{name} must be a nonnegative time in seconds, got {format_time(value)}")
        if self.from_s is not None and self.until_s is not None and self.until_s <= self.from_s:
            raise UsageError("--until must be greater than --from")


def expand_case(case: Case) -> list[ScheduledSample]:
    samples: list[ScheduledSample] = []
    index = 0
    for target in case.targets:
        for block in target.blocks:
            for time in block_times(block):
                samples.append(ScheduledSample(case, target, block, index, time))
                index += 1
    return samples


def select_cases(cases: Sequence[Case], filters: Filters, *, allow_empty: bool,
                 allow_drafts: bool = False) -> list[tuple[Case, list[ScheduledSample]]]:
    """Apply the filters; returns each case the selection touches with its samples, in order.

    A case that has none of the ``--target`` ids is left out (upstream drops it
    from the run). Raises ValidationError for targets no selected case has, for
    drafts inside the selection and for empty cases without ``allow_empty``;
    UsageError when a time filter selects nothing (``--allow-empty`` does not
    excuse that: the times asked for are not in the schedule).
    """
    known_targets = {t.id for case in cases for t in case.targets}
    missing = [t for t in filters.targets if t not in known_targets]
    if missing:
        where = str(cases[0].path.parent) if cases else None
        scope = f"case {cases[0].name!r}" if len(cases) == 1 else "the selected cases"
        raise ValidationError([unknown_target_problem(where, scope, missing[0], known_targets)])
    selected: list[tuple[Case, list[ScheduledSample]]] = []
    problems: list[Problem] = []
    for case in cases:
        if filters.targets and not any(case.target(t) is not None for t in filters.targets):
            continue
        chosen = [s for s in expand_case(case) if not filters.targets or s.target.id in filters.targets]
        chosen = _filter_times(case, chosen, filters)
        streams = selected_streams(case, filters)
        if not allow_drafts:
            problems.extend(_draft_problems(case, chosen))
            problems.extend(_draft_event_problems(case, streams))
        if not chosen and not streams and not allow_empty:
            problems.append(Problem(str(case.path), "", f"case {case.name!r} has no samples in the "
                                    "selection; pass --allow-empty to accept that"))
        selected.append((case, chosen))
    if problems:
        raise ValidationError(problems)
    return selected


def _filter_times(case: Case, chosen: list[ScheduledSample], filters: Filters) -> list[ScheduledSample]:
    if filters.at:
        # Matched to 9 decimals like declared duplicates, so --at 0.30000000000000004 finds 0.3.
        present = {same_time_key(s.time) for s in chosen}
        absent = [t for t in dict.fromkeys(filters.at) if same_time_key(t) not in present]
        if absent:
            times = ", ".join(format_time(t) for t in absent)
            nearest = sorted({s.time for s in chosen}, key=lambda t: (abs(t - absent[0]), t))[:3]
            hint = ("; nearest scheduled times: " + ", ".join(format_time(t) for t in nearest)
                    if nearest else "")
            raise UsageError(f"--at {times} is not a scheduled sample time in case {case.name!r} "
                             f"for the selected targets{hint}; see list-samples for the schedule")
        wanted = {same_time_key(t) for t in filters.at}
        return [s for s in chosen if same_time_key(s.time) in wanted]
    if filters.from_s is None and filters.until_s is None:
        return chosen
    window = [s for s in chosen
              if (filters.from_s is None or s.time >= filters.from_s)
              and (filters.until_s is None or s.time < filters.until_s)]
    if not window and chosen:
        if filters.until_s is None:
            assert filters.from_s is not None
            what = f"at or after {format_time(filters.from_s)}s"
        elif filters.from_s is None:
            what = f"before {format_time(filters.until_s)}s"
        else:
            what = f"in [{format_time(filters.from_s)}s, {format_time(filters.until_s)}s)"
        raise UsageError(f"no samples are scheduled {what} in case {case.name!r} for the selected "
                         "targets; see list-samples for the schedule")
    return window


def selected_streams(case: Case, filters: Filters) -> tuple[TargetSpec, ...]:
    """The case's stream targets the filters select, in declaration order.

    A stream is fed the whole clip, so time filters (``--at``, ``--from``, ``--until``) do not
    narrow it; ``--target`` does.
    """
    return tuple(t for t in case.targets if t.stream is not None
                 and (not filters.targets or t.id in filters.targets))


def _draft_event_problems(case: Case, streams: Sequence[TargetSpec]) -> list[Problem]:
    return [case.document.problem(("targets", t.id, "events", e.index),
                                  "event has no `expect`; write the emission that counts as noticing it")
            for t in streams if t.stream is not None for e in t.stream.events if not e.has_expect]


def _draft_problems(case: Case, samples: list[ScheduledSample]) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[str, int]] = set()
    for s in samples:
        key = (s.target.id, s.block.index)
        if s.is_draft and key not in seen:
            seen.add(key)
            path = ("targets", s.target.id, "samples", s.block.index)
            problems.append(case.document.problem(
                path, "draft sample block has no `expect`; label it, or run `seed` to propose values "
                "(explicit `expect: null` is a real expectation)"))
    return problems
