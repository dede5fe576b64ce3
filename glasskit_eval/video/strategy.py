"""Which frames to decode, and how: a cost model over the frame table (pure, no I/O).

Costs are counted in decoded frames. A needed frame can only be decoded from the last
keyframe at or before it, so the work is a set of *pieces*, each running from a keyframe
to the last needed frame after it. Two pieces are merged when decoding the frames
between them is cheaper than a seek; that makes a dense request one long sequential
span and a sparse one a few seeks. With more than one core, long spans are cut again at
keyframes so independent decoders can work on them side by side.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

#: What a seek costs, in decoded frames (index lookup, decoder flush and restart).
SEEK_COST_FRAMES = 8
#: Pieces handed to parallel decoders are at least this long (frames), so seeks stay rare.
MIN_PARALLEL_PIECE = 48
#: A single span shorter than this is not worth cutting for a second decoder.
MIN_PARALLEL_WORK = 96
#: Seek pieces go to a second single-threaded decoder when their total work (frames) is
#: at least this many times what opening that decoder's container costs. The first
#: decoder reuses the container the table was read with; the second pays an open (about
#: 20 ms, as long as decoding ~6.5 million pixels of H.264), then takes half the work.
SECOND_DECODER_MARGIN = 4
SECOND_DECODER_PIXELS = 6_500_000
#: Work below which seek pieces stay on one decoder whatever the frame size.
MIN_PARALLEL_SEEK_WORK = 16
#: The threshold when the frame size is not known.
DEFAULT_PARALLEL_SEEK_WORK = 128
MAX_WORKERS = 4

AUTO = "auto"
SEQUENTIAL = "sequential"
SEEK = "seek"
SEGMENTS = "segments"
MODES = (AUTO, SEQUENTIAL, SEEK, SEGMENTS)


@dataclass(frozen=True)
class Piece:
    """Decode from keyframe ``start`` (a frame index) and deliver ``needed`` (ascending)."""

    start: int
    needed: tuple[int, ...]

    @property
    def cost(self) -> int:
        return self.needed[-1] - self.start + 1


@dataclass(frozen=True)
class DecodePlan:
    pieces: tuple[Piece, ...]
    workers: int

    @property
    def cost(self) -> int:
        return sum(p.cost for p in self.pieces) + SEEK_COST_FRAMES * (len(self.pieces) - 1)

    @property
    def kind(self) -> str:
        if self.workers > 1:
            return SEGMENTS
        return SEQUENTIAL if len(self.pieces) == 1 else SEEK


def gop_pieces(keyframes: Sequence[int], needed: Sequence[int]) -> list[Piece]:
    """One piece per keyframe interval that holds needed frames."""
    groups: dict[int, list[int]] = {}
    for index in needed:
        key = keyframes[max(bisect.bisect_right(keyframes, index) - 1, 0)]
        groups.setdefault(key, []).append(index)
    return [Piece(key, tuple(sorted(group))) for key, group in sorted(groups.items())]


def merge_pieces(pieces: Sequence[Piece], seek_cost: int = SEEK_COST_FRAMES) -> list[Piece]:
    """Join neighbours when decoding the gap between them costs less than seeking."""
    merged: list[Piece] = []
    for piece in pieces:
        if merged and piece.start - merged[-1].needed[-1] - 1 < seek_cost:
            merged[-1] = Piece(merged[-1].start, merged[-1].needed + piece.needed)
        else:
            merged.append(piece)
    return merged


def split_piece(piece: Piece, keyframes: Sequence[int], min_frames: int) -> list[Piece]:
    """Cut a piece at keyframes into parts of at least ``min_frames`` (the last may be shorter)."""
    parts: list[Piece] = []
    start, taken = piece.start, 0
    needed = piece.needed
    while taken < len(needed):
        limit = start + min_frames
        # The first keyframe at or after ``limit`` that still has needed frames after it.
        k = bisect.bisect_left(keyframes, limit)
        cut = len(needed)
        if k < len(keyframes):
            cut = bisect.bisect_left(needed, keyframes[k], lo=taken)
            if cut < len(needed):
                # Start the next part at the keyframe right before its first needed frame.
                next_start = keyframes[bisect.bisect_right(keyframes, needed[cut]) - 1]
            else:
                next_start = start
        parts.append(Piece(start, needed[taken:cut]))
        taken = cut
        if taken < len(needed):
            start = next_start
    return parts


def parallel_seek_work(frame_pixels: int) -> int:
    """The least seek work (frames) worth a second decoder, for frames of this many pixels."""
    if frame_pixels <= 0:
        return DEFAULT_PARALLEL_SEEK_WORK
    open_frames = -(-SECOND_DECODER_PIXELS // frame_pixels)
    return max(MIN_PARALLEL_SEEK_WORK, SECOND_DECODER_MARGIN * open_frames)


def plan(keyframes: Sequence[int], needed: Sequence[int], *, mode: str = AUTO,
         cores: int = 1, frame_pixels: int = 0) -> DecodePlan:
    """Plan the decode of ``needed`` frame indices (ascending, distinct).

    ``frame_pixels`` (width x height) prices a second decoder against the seeks it takes
    over: small frames decode so fast that opening another container does not pay.
    """
    if mode not in MODES:
        raise ValueError(f"unknown decode mode {mode!r}")
    if not needed:
        return DecodePlan((), 1)
    pieces = gop_pieces(keyframes, needed)
    if mode == SEQUENTIAL:
        return DecodePlan((Piece(pieces[0].start, tuple(needed)),), 1)
    if mode == SEEK:
        return DecodePlan(tuple(pieces), 1)
    merged = merge_pieces(pieces)
    if mode == SEGMENTS:
        cut = [p for m in merged for p in split_piece(m, keyframes, 1)]
        return DecodePlan(tuple(cut), max(2, min(cores, MAX_WORKERS)))
    work = sum(p.cost for p in merged)
    workers = min(cores, MAX_WORKERS)
    parts: list[Piece] = []
    if workers >= 2 and work >= MIN_PARALLEL_WORK:
        parts = [p for m in merged for p in split_piece(m, keyframes, MIN_PARALLEL_PIECE)]
    elif workers >= 2 and work >= parallel_seek_work(frame_pixels):
        parts = merged
    if len(parts) < 2:
        return DecodePlan(tuple(merged), 1)
    return DecodePlan(tuple(parts), min(workers, len(parts)))
