"""The comparison modes and a sample's comparison settings, without the comparators.

Case-file validation needs only these; keeping them apart from :mod:`compare` spares
``validate`` the comparators' imports (json, decimal) at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODES", "CompareConfig", "infer_mode"]

MODES = ("exact", "numeric", "json_subset", "set_equals", "set_contains_any", "set_contains_all")


@dataclass(frozen=True, slots=True)
class CompareConfig:
    """How one sample is compared; ``tolerance`` only matters to ``numeric``."""

    mode: str
    tolerance: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "tolerance": self.tolerance}


def infer_mode(expect: object) -> str:
    """The mode used when no ``compare`` is configured: ``numeric`` for numbers only."""
    if isinstance(expect, bool):
        return "exact"
    if isinstance(expect, (int, float)):
        return "numeric"
    return "exact"
