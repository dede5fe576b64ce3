"""Let glibc keep freed frame-sized blocks for the next frame instead of returning them.

Decoded frames, RGB images, spilled frames read back, PNGs and request lines are buffers
of megabytes, made and freed by the thousand. With glibc's defaults a block that large is
served by its own ``mmap`` (or trimmed off the heap once freed), so every new frame pays
a page fault and a zeroed page per 4 KiB in the kernel: on a dense run with five targets
that cost ~40% of the process's CPU time and half its wall time. With higher mmap and
trim thresholds freed frames' memory serves the next ones; the peak RSS stays within
~10% (blocks are reused, not piled up: ``benchmarks/bench_frames.py``).

Called by the commands that decode, never at import. Linux with glibc only; a user's own
``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` wins.
"""

from __future__ import annotations

import os
import sys

# glibc's mallopt() parameter numbers (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Blocks up to this size come from the heap: glibc's ceiling on 64-bit (a 1080p frame in
#: Pillow is 8.3 MB; a 4K one, 33 MB, stays above it).
MMAP_THRESHOLD = 32 << 20
#: Free memory kept at the top of a heap before it is given back to the system.
TRIM_THRESHOLD = 256 << 20

_applied: bool | None = None


def reuse_freed_frames() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; whether they are in effect."""
    global _applied
    if _applied is None:
        _applied = _apply()
    return _applied


def _apply() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError):  # no ctypes, or a libc without mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # musl has the symbol but ignores it (returns 0): nothing is changed then either.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


#: Blocks from this size on get their own mapping again while frames are held in bulk.
HELD_FRAMES_MMAP_THRESHOLD = 256 << 10


def hold_frames() -> None:
    """Give frame-sized blocks their own mappings again: for ``evaluate_many``, which holds a
    target's frames at once.

    Reusing freed blocks pays when frames come and go one at a time; when hundreds are kept,
    the conversions' freed buffers between them are never reused and the peak RSS grew to
    1.8 times the frames' own size (300 frames of 640x480: 621 MiB for 352 MiB of images;
    with their own mappings, 364 MiB). Only undoes what :func:`reuse_freed_frames` did.
    """
    if not _applied:
        return
    import ctypes

    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, HELD_FRAMES_MMAP_THRESHOLD)
