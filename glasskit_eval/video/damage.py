"""Packets a decoder could not decode, and the one warning a damaged video gets.

Truncated recordings (a camera that lost power, a copy that stopped early) and damaged
files end in, or contain, packets that no decoder can decode. Those packets are skipped,
not fatal: every frame that can be decoded still is. What was lost is recorded here so
the run can say so once per video: how many packets, which frames, and which requested
times got a neighbouring frame because their nearest frame was one of the lost ones.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

from ..support.timevalues import format_time
from .frametable import FileKey, file_key

Warn = Callable[[str], None]

#: Lost frames and affected times named in the warning (the rest are counted).
SHOWN = 5


class Damage:
    """What the decoders of one video could not decode (shared between decoder threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.skipped_packets = 0
        #: Rebased media times of frames the container has but no decoder produced.
        self.lost: set[Fraction] = set()
        #: Requested times whose nearest frame was lost, so they got its nearest neighbour.
        self.affected: set[Fraction] = set()
        #: True when frame numbers after a skipped packet had to be guessed (no timestamps).
        self.numbering_guessed = False

    def __bool__(self) -> bool:
        return bool(self.skipped_packets or self.lost)

    def skip(self) -> None:
        with self._lock:
            self.skipped_packets += 1

    def lose(self, times: Sequence[Fraction]) -> None:
        with self._lock:
            self.lost.update(times)

    def affect(self, want: Fraction) -> None:
        with self._lock:
            self.affected.add(want)

    def describe(self, path: Path) -> str:
        packets = self.skipped_packets
        parts = [f"{path}: the video is damaged or truncated"]
        if packets:
            parts.append(f"{packets} video packet{'s' if packets != 1 else ''} could not be decoded "
                         "and were skipped")
        if self.lost:
            parts.append(f"{len(self.lost)} frame{'s' if len(self.lost) != 1 else ''} could not be "
                         f"decoded (at {_times(self.lost)})")
        if self.affected:
            parts.append(f"sample time{'s' if len(self.affected) != 1 else ''} {_times(self.affected)} "
                         "got the nearest decodable frame instead of a lost one")
        if self.numbering_guessed:
            parts.append("the file has no frame timestamps, so frames after a skipped packet are "
                         "numbered and timed as if it held one frame")
        return "; ".join(parts)


def _times(times: set[Fraction]) -> str:
    ordered = sorted(times)
    text = ", ".join(f"{format_time(t)}s" for t in ordered[:SHOWN])
    return text + (f" and {len(ordered) - SHOWN} more" if len(ordered) > SHOWN else "")


def print_warning(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


_reported: set[FileKey] = set()
_reported_lock = threading.Lock()


def report(path: Path, damage: Damage, warn: Warn | None) -> None:
    """Warn about ``damage`` once per video and process (nothing when there is none)."""
    if not damage:
        return
    key = file_key(path)
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    (warn or print_warning)(damage.describe(path))


def nearest_was_lost(want: Fraction, chosen: Fraction, lost: Sequence[Fraction]) -> bool:
    """Would ``want`` have selected one of the ``lost`` frame times over ``chosen``?

    The selection rule applied to the lost frames too: nearest, ties to the earlier.
    """
    gap = abs(chosen - want)
    return any(abs(t - want) < gap or (abs(t - want) == gap and t < chosen) for t in lost)
