"""Agreement between two labellers of the same items: percent agreement and Cohen's kappa with its interval.

Items are pairs of category labels (any hashable values, compared with ``==``), one pair per item.
The interval is ``kappa +- z * se`` with the large-sample standard error of Fleiss, Cohen and
Everitt (1969), "Large sample standard errors of kappa and weighted kappa", Psychological
Bulletin 72(5), eq. 13 (the non-null variance; the one statsmodels reports as ``std_kappa``),
clipped to [-1, 1]. With ``p_ij`` the share of items the first labeller put in ``i`` and the
second in ``j``, ``p_i.``/``p_.j`` the margins, ``p_o`` the observed and ``p_e`` the chance
agreement::

    var = ( sum_i p_ii (1 - (p_i. + p_.i)(1 - k))^2
          + (1 - k)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
          - (k - p_e (1 - k))^2 ) / (n (1 - p_e)^2)

Kappa is undefined when chance agreement is 1 (both labellers always give the same one
category): then it is None. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

#: How the report names the variance formula.
VARIANCE = "Fleiss, Cohen & Everitt (1969) large-sample"


@dataclass(frozen=True, slots=True)
class Kappa:
    items: int
    #: Share of items both labellers put in the same category.
    observed: float
    #: Agreement expected by chance from the two labellers' margins.
    chance: float
    #: None when chance agreement is 1 (undefined).
    kappa: float | None
    se: float | None
    low: float | None
    high: float | None
    confidence: float

    def to_json(self) -> dict[str, object]:
        return {"items": self.items, "percent_agreement": self.observed * 100, "chance_agreement": self.chance,
                "kappa": self.kappa, "kappa_se": self.se,
                "kappa_ci": [self.low, self.high] if self.low is not None else None,
                "confidence": self.confidence, "variance": VARIANCE}


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]], confidence: float = 0.95) -> Kappa | None:
    """Cohen's kappa of ``(first, second)`` labels with its interval; None for no items."""
    n = len(pairs)
    if n == 0:
        return None
    joint: dict[tuple[Hashable, Hashable], int] = {}
    rows: dict[Hashable, int] = {}
    cols: dict[Hashable, int] = {}
    for a, b in pairs:
        joint[(a, b)] = joint.get((a, b), 0) + 1
        rows[a] = rows.get(a, 0) + 1
        cols[b] = cols.get(b, 0) + 1
    observed = sum(count for (a, b), count in joint.items() if a == b) / n
    chance = sum(rows[c] * cols.get(c, 0) for c in rows) / (n * n)
    if math.isclose(chance, 1.0, rel_tol=0.0, abs_tol=1e-12):
        return Kappa(n, observed, chance, None, None, None, None, confidence)
    kappa = (observed - chance) / (1 - chance)
    row = {c: count / n for c, count in rows.items()}
    col = {c: count / n for c, count in cols.items()}
    diagonal = off = 0.0
    for (a, b), count in joint.items():
        p = count / n
        if a == b:
            diagonal += p * (1 - (row[a] + col[a]) * (1 - kappa)) ** 2
        else:
            off += p * (col.get(a, 0.0) + row.get(b, 0.0)) ** 2
    variance = (diagonal + (1 - kappa) ** 2 * off - (kappa - chance * (1 - kappa)) ** 2) / (n * (1 - chance) ** 2)
    se = math.sqrt(max(variance, 0.0))
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return Kappa(n, observed, chance, kappa, se, max(-1.0, kappa - z * se), min(1.0, kappa + z * se), confidence)


def within_tolerance(pairs: Sequence[tuple[float, float]], tolerance: float) -> float | None:
    """Share of numeric pairs that differ by at most ``tolerance``; None for no pairs."""
    if not pairs:
        return None
    return sum(1 for a, b in pairs if abs(a - b) <= tolerance) / len(pairs)
