"""What ``--jitter-frames`` found: samples whose verdict flips on the frames next to theirs.

The record only; ``evaluation.jitter`` makes it, the reporters render it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JitterFinding:
    """A sample whose verdict flips on neighbouring frames."""

    case: str
    target: str
    timestamp_s: float
    frame_index: int
    #: The neighbouring frames whose verdict differs from the sample's, ascending.
    flipped_frames: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"case": self.case, "flipped_frames": list(self.flipped_frames), "frame_index": self.frame_index,
                "target": self.target, "timestamp_s": self.timestamp_s}


@dataclass(frozen=True)
class JitterReport:
    """What ``--jitter-frames`` found: the flipping samples, and what it took."""

    frames: int
    #: The arm evaluated (None: the plain adapter of a run without arms).
    arm: str | None
    samples: int
    calls: int
    errors: int
    findings: tuple[JitterFinding, ...]

    def to_json(self) -> list[dict[str, Any]]:
        """The report's ``jitter`` key."""
        return [f.to_json() for f in self.findings]
