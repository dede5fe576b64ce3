"""Suspect labels from the votes a run already made: repeats and arms that agree with each other, not the label.

The rule, stated once (the README quotes it):

* A *vote* is one judged observation of a sample: a result that passed or failed, from any
  trial, by any arm except a perturbation arm (its frames are degraded on purpose, so its
  mistakes say nothing about the label). Errors and ignored results do not vote.
* A passed result votes *for* the label. Failed results vote *against* it, and are grouped by
  the value they observed (after ``field``): two votes agree when the sample's comparison says
  so with one side as the expectation - ``numeric`` within the sample's tolerance, ``exact`` and
  ``json_subset`` as equal JSON, the set modes as equal sets.
* With ``n`` votes and quorum ``q`` (default 2/3): the sample is a **suspect label** when one group
  of votes against holds at least ``q * n`` votes; it is **confirmed** when the votes for hold at
  least ``q * n``; otherwise its votes split and it is **ambiguous**. The consensus is the value
  most often observed in the largest group against.
* A sample with fewer than two votes is not judged; when no sample has two, nothing is claimed
  and the check says that repeats or arms are needed.

With an adapter right with probability p on each call independently, an honest label is
suspected with probability P(Binomial(n, 1 - p) >= q n): for n = 9 votes at p = 0.9, 6e-5 per
sample; a wrong boolean label is found with probability P(Binomial(n, p) >= q n), 0.99.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..compare.values import CompareConfig, compare_values, infer_mode
from ..results import SampleResult, Status
from ..support.jsonvalues import canonical_key

#: The default quorum: two votes in three.
QUORUM = Fraction(2, 3)
#: The fewest votes a sample needs before anything is said about its label.
MIN_VOTES = 2
#: (case, target, sample_index)
Key = tuple[str, str, int]
#: How the votes of one sample are compared with each other.
CompareOf = Callable[[SampleResult], CompareConfig]

NEEDS_VOTES = ("one vote per sample: nothing is claimed about labels; run with --repeat 2 or more, or with "
               "several arms (--arm; perturbation arms do not vote)")

#: How votes against are compared with each other, per comparison mode: a subset or an overlap is
#: not agreement between two observations, so those modes group by equality.
_AMONG = {"numeric": "numeric", "exact": "exact", "json_subset": "exact", "set_equals": "set_equals",
          "set_contains_any": "set_equals", "set_contains_all": "set_equals"}


@dataclass(frozen=True, slots=True)
class LabelFinding:
    """One sample whose votes do not back its label: a suspect, or an ambiguous sample."""

    case: str
    target: str
    target_label: str | None
    sample_index: int
    #: The sample's time in seconds.
    at: float
    expected: Any
    #: The value most often observed in the largest group of votes against (None: no votes against).
    consensus: Any
    #: Votes in the largest group against (the consensus's).
    votes_against: int
    #: Votes for the label.
    votes_for: int
    votes: int
    field: str | None
    compare_mode: str | None
    #: Every observed value with its count, most frequent first (ambiguous samples show their split).
    values: tuple[tuple[Any, int], ...] = ()
    #: The frame the votes were cast on (None for results without one).
    frame_index: int | None = None

    @property
    def key(self) -> Key:
        return (self.case, self.target, self.sample_index)

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "target": self.target, "sample_index": self.sample_index, "at": self.at,
                "expected": self.expected, "consensus": self.consensus, "votes_against": self.votes_against,
                "votes_for": self.votes_for, "votes": self.votes, "field": self.field,
                "compare_mode": self.compare_mode, "frame_index": self.frame_index,
                "values": [{"value": value, "count": count} for value, count in self.values]}


@dataclass(frozen=True, slots=True)
class LabelCheck:
    """Every sample's votes weighed: suspects (strongest first), ambiguous samples, and what was counted."""

    suspects: tuple[LabelFinding, ...]
    ambiguous: tuple[LabelFinding, ...]
    quorum: Fraction
    #: Samples with at least MIN_VOTES votes (the ones judged).
    judged: int
    #: Samples with fewer votes.
    unjudged: int
    #: The arms that voted (empty in a run without arms), and the ones left out.
    voting_arms: tuple[str, ...] = ()
    abstaining_arms: tuple[str, ...] = ()

    @property
    def claimed(self) -> bool:
        """Whether any sample had the votes to be judged; False: say repeats or arms are needed."""
        return self.judged > 0

    @property
    def note(self) -> str | None:
        return None if self.claimed else NEEDS_VOTES

    def rule(self) -> str:
        q = self.quorum
        return (f"Suspect: at least {q.numerator}/{q.denominator} of a sample's votes agree on one value other than "
                f"the label; ambiguous: neither that nor {q.numerator}/{q.denominator} for the label "
                f"(votes: passed or failed results of every trial and non-perturbation arm)")

    def to_json(self) -> dict[str, Any]:
        return {"claimed": self.claimed, "note": self.note, "rule": self.rule(),
                "quorum": float(self.quorum), "judged_samples": self.judged, "unjudged_samples": self.unjudged,
                "voting_arms": list(self.voting_arms), "abstaining_arms": list(self.abstaining_arms),
                "suspects": len(self.suspects), "ambiguous": len(self.ambiguous)}


def default_compare(result: SampleResult) -> CompareConfig:
    """A sample's comparison as its result records it (the mode; tolerance 0 when nothing better is known)."""
    return CompareConfig(result.compare_mode or infer_mode(result.expected))


def compare_from(configs: Mapping[Key, CompareConfig]) -> CompareOf:
    """Comparisons looked up by sample (the plan's, with their tolerances), the recorded mode otherwise."""
    def of(result: SampleResult) -> CompareConfig:
        return configs.get(result.key) or default_compare(result)
    return of


def check_labels(results: Iterable[SampleResult], *, abstaining_arms: Collection[str] = (),
                 quorum: Fraction = QUORUM, compare_of: CompareOf = default_compare) -> LabelCheck:
    """Weigh every sample's votes (results of all trials and arms, in run order) against its label."""
    if not 0 < quorum <= 1 or quorum <= Fraction(1, 2):
        # At or below one half a label could be suspect and confirmed at once.
        raise ValueError(f"quorum must be above 1/2 and at most 1, got {quorum}")
    votes: dict[Key, list[SampleResult]] = {}
    arms: dict[str, None] = {}
    abstained: dict[str, None] = {}
    seen: dict[Key, None] = {}
    for r in results:
        if r.arm is not None:
            (abstained if r.arm in abstaining_arms else arms).setdefault(r.arm)
        seen.setdefault(r.key)
        if r.status in (Status.PASSED, Status.FAILED) and r.arm not in abstaining_arms:
            votes.setdefault(r.key, []).append(r)
    suspects: list[LabelFinding] = []
    ambiguous: list[LabelFinding] = []
    judged = 0
    for key in seen:
        mine = votes.get(key, [])
        if len(mine) < MIN_VOTES:
            continue
        judged += 1
        finding, verdict = _weigh(mine, quorum, compare_of(mine[0]))
        if verdict == "suspect":
            suspects.append(finding)
        elif verdict == "ambiguous":
            ambiguous.append(finding)
    suspects.sort(key=_strength)
    ambiguous.sort(key=_strength)
    return LabelCheck(tuple(suspects), tuple(ambiguous), quorum, judged, len(seen) - judged,
                      tuple(arms), tuple(abstained))


def _strength(f: LabelFinding) -> tuple[Fraction, int, str, str, float]:
    return (-Fraction(f.votes_against, f.votes), -f.votes, f.case, f.target, f.at)


def _weigh(votes: list[SampleResult], quorum: Fraction, config: CompareConfig) -> tuple[LabelFinding, str]:
    among = CompareConfig(_AMONG.get(config.mode, "exact"), config.tolerance)
    groups: list[list[Any]] = []
    agreeing: list[Any] = []
    for r in votes:
        if r.status is Status.PASSED:
            agreeing.append(r.observed_value)
            continue
        for group in groups:
            if compare_values(group[0], r.observed_value, among).passed:
                group.append(r.observed_value)
                break
        else:
            groups.append([r.observed_value])
    largest = max(groups, key=len, default=[])
    n = len(votes)
    first = votes[0]
    finding = LabelFinding(
        case=first.case, target=first.target, target_label=first.target_label, sample_index=first.sample_index,
        at=first.timestamp_s, expected=first.expected, consensus=_modal(largest)[0][0] if largest else None,
        votes_against=len(largest), votes_for=len(agreeing), votes=n, field=first.field, compare_mode=first.compare_mode,
        values=_modal([*agreeing, *(v for g in groups for v in g)]),
        frame_index=next((r.frame_index for r in votes if r.frame_index is not None), None))
    if len(largest) >= quorum * n:
        return finding, "suspect"
    if len(agreeing) >= quorum * n:
        return finding, "confirmed"
    return finding, "ambiguous"


def _modal(values: list[Any]) -> tuple[tuple[Any, int], ...]:
    """Distinct values (JSON equality) with their counts, most frequent first, first seen first on ties."""
    counts: dict[Any, list[Any]] = {}
    for value in values:
        entry = counts.setdefault(canonical_key(value), [value, 0])
        entry[1] += 1
    ranked = sorted(enumerate(counts.values()), key=lambda item: (-item[1][1], item[0]))
    return tuple((value, count) for _i, (value, count) in ranked)
