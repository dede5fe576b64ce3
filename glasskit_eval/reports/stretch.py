"""Why a comparison without repeats is inconclusive: the longest stretch of consecutive pass -> fail.

Without repeats the paired test learns its noise from the between-version differences, where a
drop confined to one stretch of video looks like correlated noise. The comparison then names
that stretch (case, target, from-to seconds) and the ``--repeat`` N at which a drop of its size
would be detectable (:func:`~glasskit_eval.statistics.power.repeats_to_detect`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..statistics.effective import corrected_autocorrelation
from ..statistics.paired import PairedTest
from ..statistics.power import repeats_to_detect
from .tables import time_label


class Paired(Protocol):
    """One side's outcome of a matched sample: its time and pass fraction."""

    @property
    def timestamp_s(self) -> float: ...

    @property
    def passes(self) -> float | None: ...


P = TypeVar("P", bound=Paired)
#: The tested samples' (baseline, candidate) outcomes: by target, then by case, in time order.
Matched = dict[str, dict[str, list[tuple[P, P]]]]


@dataclass(frozen=True, slots=True)
class Stretch:
    """The longest run of consecutive matched samples that went pass -> fail (one case and target)."""

    case: str
    target: str
    from_s: float
    to_s: float
    samples: int
    #: The ``--repeat`` at which a drop of this size would be detectable (None: not even at 50).
    repeat: int | None

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "target": self.target, "from_s": self.from_s, "to_s": self.to_s,
                "samples": self.samples, "suggested_repeat": self.repeat}

    def text(self) -> str:
        where = (f"{self.samples} consecutive pass->fail samples in case {self.case}, target {self.target}, "
                 f"{time_label(self.from_s)}s to {time_label(self.to_s)}s")
        advice = (f"rerun both versions with --repeat {self.repeat} so the test learns the model's noise "
                  "from its trials and can see a drop of that size" if self.repeat is not None
                  else "even --repeat 50 would not make a drop of that size detectable; add samples")
        return (f"why inconclusive: {where}; without repeats the noise is estimated from the differences, "
                f"where a stretch like this looks like correlated noise; {advice}")


def longest_stretch(matched: Matched[P], overall: PairedTest, alpha: float, power: float) -> Stretch | None:
    """The longest run of consecutive pass -> fail samples, and the ``--repeat`` that would see its drop.

    The suggestion treats the stretch as the drop and everything else as noise: the flip rate of
    the pairs outside it, with the autocorrelation of the differences left when the stretch is
    taken out (:func:`~glasskit_eval.statistics.power.repeats_to_detect`).
    """
    best: tuple[int, str, str, int] | None = None  # (length, target, case, end index)
    for target, cases in matched.items():
        for case, items in cases.items():
            run = 0
            for index, (old, now) in enumerate(items):
                run = run + 1 if old.passes == 1.0 and now.passes == 0.0 else 0
                if run and (best is None or run > best[0]):
                    best = (run, target, case, index)
    if best is None:
        return None
    length, target, case, end = best
    items = matched[target][case]
    rest = [[(now.passes or 0.0) - (old.passes or 0.0) for i, (old, now) in enumerate(series)
             if not (t == target and c == case and end - length < i <= end)]
            for t, cases in matched.items() for c, series in cases.items()]
    others = sum(len(values) for values in rest)
    noise = sum(d * d for values in rest for d in values) / others if others else 0.0
    n = overall.pairs
    repeat = repeats_to_detect(length / n, n, noise, corrected_autocorrelation(rest), alpha=alpha, power=power)
    return Stretch(case, target, items[end - length + 1][0].timestamp_s, items[end][0].timestamp_s, length, repeat)


