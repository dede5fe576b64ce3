"""The comparison modes and a sample's comparison settings, without the comparators.

Case-file validation needs only these; keeping them apart from :mod:`compare` spares
``validate`` the comparators' imports (json, decimal) at start-up.
"""

from __future__ import annotations

from ..support.records import Frozen

__all__ = ["MODES", "CompareConfig", "infer_mode"]

MODES = ("exact", "numeric", "json_subset", "set_equals", "set_contains_any", "set_contains_all")


class CompareConfig(Frozen):
    """How one sample is compared; ``tolerance`` only matters to ``numeric``."""

    _fields = ("mode", "tolerance")
    mode: str
    tolerance: float

    def __init__(self, mode: str, tolerance: float = 0.0) -> None:
        self.__dict__.update(mode=mode, tolerance=tolerance)

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "tolerance": self.tolerance}


def infer_mode(expect: object) -> str:
    """The mode used when no ``compare`` is configured: ``numeric`` for numbers only."""
    if isinstance(expect, bool):
        return "exact"
    if isinstance(expect, (int, float)):
        return "numeric"
    return "exact"
