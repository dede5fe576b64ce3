"""The boxes of an MP4/MOV file that say where and when its samples are (pure Python).

``find_moov`` reads the top-level box headers (one small read each) and loads ``moov``;
``parse_movie`` reads the first video track's sample tables and every track's sample
layout, refusing (:class:`IndexUnusable`) anything it cannot read with certainty, as
``mp4index`` explains.
"""

from __future__ import annotations

import itertools
import operator
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

MAX_MOOV_BYTES = 256 << 20
#: Composition offsets beyond this make FFmpeg drop ``ctts`` (treated as unusable).
_CTTS_LIMIT = 1 << 28


class IndexUnusable(Exception):
    """The index cannot be read with certainty; demux the file instead."""


@dataclass(frozen=True, slots=True)
class Runs:
    """A run-length table (``stts``, ``ctts``): ``counts[i]`` samples have ``values[i]``."""

    counts: Sequence[int]
    values: Sequence[int]

    @property
    def total(self) -> int:
        return sum(self.counts)

    def expand(self) -> list[int]:
        """One value per sample."""
        counts, values = self.counts, self.values
        if max(counts, default=0) == 1:
            return list(values)  # ctts of a B-frame stream: often one entry per sample
        if 4 * len(counts) < self.total:
            return list(itertools.chain.from_iterable(map(itertools.repeat, values, counts)))
        # Mostly one-sample runs: copy those in slices, repeat only the longer runs.
        out: list[int] = []
        start = 0
        for i in itertools.compress(itertools.count(), map(operator.ne, counts, itertools.repeat(1))):
            out += values[start:i]
            out += [values[i]] * counts[i]
            start = i + 1
        out += values[start:]
        return out


@dataclass(frozen=True, slots=True)
class Track:
    """The sample tables of one video track, as stored."""

    track_id: int
    timescale: int
    movie_timescale: int
    sample_count: int
    stts: Runs  # decode time deltas
    ctts: Runs | None  # composition offsets, the entries FFmpeg keeps
    dts_shift: int
    sync: list[int] | None  # 1-based sample numbers (None: every sample is a keyframe)
    sizes: array[int]  # per sample
    chunk_offsets: array[int]
    stsc: list[tuple[int, int]]  # (first chunk, samples per chunk), 1-based chunks
    edits: list[tuple[int, int]]  # (duration in movie timescale, media time)


def children(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, box end) of the boxes in ``data[start:end]``; damage raises."""
    pos = start
    while pos < end:
        if end - pos < 8:
            raise IndexUnusable("a box header is cut short")
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            if end - pos < 16:
                raise IndexUnusable("a box header is cut short")
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            raise IndexUnusable(f"box {kind!r} has an impossible size")
        yield kind, pos + header, pos + size
        pos += size


def find_moov(f: BinaryIO, file_size: int) -> tuple[bytes, list[tuple[int, int]]]:
    """The payload of the top-level ``moov`` box, and the (start, end) of every ``mdat``
    payload, read with one seek per top-level box."""
    pos = 0
    moov: bytes | None = None
    mdats: list[tuple[int, int]] = []
    while pos + 8 <= file_size:
        f.seek(pos)
        head = f.read(16)
        size, kind = struct.unpack_from(">I4s", head)
        header = 8
        if size == 1:
            if len(head) < 16:
                raise IndexUnusable("a top-level box header is cut short")
            (size,) = struct.unpack_from(">Q", head, 8)
            header = 16
        elif size == 0:
            size = file_size - pos
        if size < header:
            raise IndexUnusable(f"top-level box {kind!r} has an impossible size")
        if kind in (b"moof", b"mfra"):
            raise IndexUnusable("fragmented MP4")
        if kind == b"moov":
            if moov is not None:
                raise IndexUnusable("two moov boxes")
            if pos + size > file_size:
                raise IndexUnusable("the moov box is cut short")
            if size > MAX_MOOV_BYTES:
                raise IndexUnusable("the moov box is too large to load")
            f.seek(pos + header)
            moov = f.read(size - header)
        elif kind == b"mdat":
            mdats.append((pos + header, min(pos + size, file_size)))
        pos += size
    if moov is None:
        raise IndexUnusable("no moov box")
    return moov, mdats


def _full(data: bytes, start: int, end: int, need: int) -> int:
    """Version of a full box whose payload must hold ``need`` bytes after version/flags."""
    if end - start < 4 + need:
        raise IndexUnusable("a sample table box is cut short")
    return data[start]


def _be_array(kind: str, data: bytes, start: int, count: int, itemsize: int) -> array[int]:
    values = array(kind)
    assert values.itemsize == itemsize
    values.frombytes(data[start:start + count * itemsize])
    if len(values) != count:
        raise IndexUnusable("a sample table box is cut short")
    if sys.byteorder == "little":
        values.byteswap()
    return values


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a track's samples are: sizes, chunks and samples per chunk."""

    sizes: array[int]
    chunk_offsets: array[int]
    stsc: list[tuple[int, int]]  # (first chunk, samples per chunk), 1-based chunks


def parse_movie(moov: bytes) -> tuple[Track, list[Layout]]:
    """The first video track's sample tables, and the sample layout of every track."""
    movie_timescale = 0
    for kind, start, end in children(moov, 0, len(moov)):
        if kind == b"mvex":
            raise IndexUnusable("fragmented MP4")
        if kind == b"cmov":
            raise IndexUnusable("compressed moov")
        if kind == b"mvhd":
            version = _full(moov, start, end, 20)
            offset = start + 4 + (16 if version == 1 else 8)
            (movie_timescale,) = struct.unpack_from(">I", moov, offset)
    video: Track | None = None
    layouts: list[Layout] = []
    for kind, start, end in children(moov, 0, len(moov)):
        if kind != b"trak":
            continue
        boxes = _trak_boxes(moov, start, end)
        layout = _layout(moov, boxes)
        if layout is not None:
            layouts.append(layout)
        if video is None:
            video = _video_track(moov, boxes, movie_timescale, layout)
    if video is None:
        raise IndexUnusable("no video track")
    return video, layouts


def _trak_boxes(data: bytes, start: int, end: int) -> dict[bytes, tuple[int, int]]:
    boxes: dict[bytes, tuple[int, int]] = {}

    def walk(s: int, e: int, path: tuple[bytes, ...]) -> None:
        for kind, cs, ce in children(data, s, e):
            if kind in (b"mdia", b"minf", b"stbl", b"edts"):
                walk(cs, ce, (*path, kind))
            elif kind == b"hdlr" and path[-1:] != (b"mdia",):
                continue  # QuickTime's data handler (in minf) says nothing about the media
            elif kind in boxes and kind in _TABLES:
                raise IndexUnusable(f"two {kind.decode('latin-1')} boxes")
            elif kind in (b"sbgp", b"sgpd"):
                # FFmpeg reads the 'rap ' and 'sync' groupings (they mark keyframes and open-GOP
                # seek points); others, such as temporal layers, do not change its packets.
                if ce - cs < 8:
                    raise IndexUnusable("a sample group box is cut short")
                if data[cs + 4:cs + 8] in (b"rap ", b"sync"):
                    boxes[b"group " + data[cs + 4:cs + 8]] = (cs, ce)
            else:
                boxes.setdefault(kind, (cs, ce))

    walk(start, end, ())
    return boxes


def _layout(data: bytes, boxes: dict[bytes, tuple[int, int]]) -> Layout | None:
    """A track's sample layout (None: a track without samples)."""
    if b"stz2" in boxes:
        raise IndexUnusable("stz2 box")
    if b"stsz" not in boxes or b"stsc" not in boxes:
        if b"stco" in boxes or b"co64" in boxes:
            raise IndexUnusable("chunks without sample sizes")
        return None
    sizes, _count = _read_stsz(data, *boxes[b"stsz"])
    stsc = _read_stsc(data, *boxes[b"stsc"])
    if b"stco" in boxes and b"co64" in boxes:
        raise IndexUnusable("both stco and co64")
    if b"stco" in boxes:
        offsets = _read_offsets(data, *boxes[b"stco"], "I", 4)
    elif b"co64" in boxes:
        offsets = _read_offsets(data, *boxes[b"co64"], "Q", 8)
    else:
        raise IndexUnusable("no chunk offsets")
    if not sizes and not offsets:
        return None
    return Layout(sizes, offsets, stsc)


def _video_track(data: bytes, boxes: dict[bytes, tuple[int, int]], movie_timescale: int,
                 layout: Layout | None) -> Track | None:
    if b"hdlr" not in boxes:
        raise IndexUnusable("a track has no handler")
    hs, he = boxes[b"hdlr"]
    _full(data, hs, he, 8)
    if data[hs + 8:hs + 12] != b"vide":
        return None
    track_id = -1
    if b"tkhd" in boxes:
        ts, te = boxes[b"tkhd"]
        version = _full(data, ts, te, 20)
        (track_id,) = struct.unpack_from(">I", data, ts + 4 + (16 if version == 1 else 8))
    for unsupported in (b"stps", b"group rap ", b"group sync"):
        if unsupported in boxes:
            raise IndexUnusable(f"{unsupported.decode('latin-1')} box (keyframes beyond stss)")
    for needed in (b"mdhd", b"stsd", b"stts"):
        if needed not in boxes:
            raise IndexUnusable(f"no {needed.decode('latin-1')} box")
    if layout is None:
        raise IndexUnusable("the video track has no samples")

    ms, me = boxes[b"mdhd"]
    version = _full(data, ms, me, 20)
    (timescale,) = struct.unpack_from(">I", data, ms + 4 + (16 if version == 1 else 8))
    if timescale <= 0:
        raise IndexUnusable("media timescale is zero")

    ss, se = boxes[b"stsd"]
    _full(data, ss, se, 12)
    if struct.unpack_from(">I", data, ss + 4)[0] != 1:
        raise IndexUnusable("several sample descriptions")
    fourcc = data[ss + 12:ss + 16]

    stts = _read_stts(data, *boxes[b"stts"])
    sample_count = len(layout.sizes)
    if stts.total != sample_count:
        raise IndexUnusable("stts and stsz disagree on the sample count")
    ctts: Runs | None = None
    dts_shift = 0
    if b"ctts" in boxes:
        ctts, dts_shift = _read_ctts(data, *boxes[b"ctts"])
        if ctts is not None and ctts.total != sample_count:
            raise IndexUnusable("ctts and stsz disagree on the sample count")
    sync = _read_stss(data, *boxes[b"stss"], sample_count) if b"stss" in boxes else None
    if sync is None and fourcc not in INTRA_ONLY:
        # "Every sample is a keyframe" is only plausible for intra-only codecs; FFmpeg's parser
        # would flag the real keyframes of anything else.
        raise IndexUnusable("no stss for a codec with inter frames")
    edits: list[tuple[int, int]] = []
    if b"elst" in boxes:
        edits = _read_elst(data, *boxes[b"elst"])
        if edits and movie_timescale <= 0:
            raise IndexUnusable("movie timescale is zero")
    return Track(track_id, timescale, movie_timescale, sample_count, stts, ctts, dts_shift, sync,
                 layout.sizes, layout.chunk_offsets, layout.stsc, edits)


#: Sample description formats whose every frame is a keyframe (``stss`` may be left out).
INTRA_ONLY = {b"jpeg", b"mjpa", b"mjpb", b"png ", b"raw ", b"apch", b"apcn", b"apcs", b"apco", b"ap4h",
              b"ap4x", b"AVdn", b"AVdh", b"dvh1", b"dvhp", b"dvh5", b"dvh6", b"dvc ", b"dvcp", b"dv5n",
              b"dv5p", b"r210", b"v210", b"2vuy", b"yuv2"}

_TABLES = {b"stts", b"ctts", b"stss", b"stsz", b"stsc", b"stco", b"co64", b"elst", b"mdhd", b"stsd", b"hdlr"}


def _count(data: bytes, start: int, end: int, entry: int, extra: int = 0) -> int:
    _full(data, start, end, 4 + extra)
    count: int = struct.unpack_from(">I", data, start + 4 + extra)[0]
    if 8 + extra + count * entry > end - start:
        raise IndexUnusable("a sample table box is cut short")
    return count


def _read_stts(data: bytes, start: int, end: int) -> Runs:
    count = _count(data, start, end, 8)
    raw = _be_array("I", data, start + 8, 2 * count, 4)
    counts, deltas = raw[0::2], raw[1::2]
    if count and min(counts) == 0:
        kept = [(c, d) for c, d in zip(counts, deltas, strict=True) if c]
        counts, deltas = array("I", [c for c, _d in kept]), array("I", [d for _c, d in kept])
    if max(deltas, default=0) >= 1 << 31:
        raise IndexUnusable("an stts delta FFmpeg would correct")
    # A zero delta gives two samples one decode time; only the last sample may have one.
    if (len(deltas) > 1 and min(deltas[:-1]) == 0) or (deltas and deltas[-1] == 0 and counts[-1] > 1):
        raise IndexUnusable("samples share a decode time")
    return Runs(counts, deltas)


def _read_ctts(data: bytes, start: int, end: int) -> tuple[Runs | None, int]:
    count = _count(data, start, end, 8)
    if not count:
        return None, 0
    raw = _be_array("i", data, start + 8, 2 * count, 4)
    counts, values = raw[0::2], raw[1::2]
    if max(map(abs, values)) > _CTTS_LIMIT:
        raise IndexUnusable("a ctts offset FFmpeg would reject")
    # FFmpeg ignores entries with no samples, and leaves the last two entries out of the shift.
    if min(counts) > 0:
        shift = max(0, -min(values[:count - 2], default=0))
        return Runs(counts, values), shift
    shifting = [v for c, v in zip(counts[:count - 2], values[:count - 2], strict=True) if c > 0]
    shift = max(0, -min(shifting, default=0))
    kept = [(c, v) for c, v in zip(counts, values, strict=True) if c > 0]
    return Runs(array("i", [c for c, _v in kept]), array("i", [v for _c, v in kept])), shift


def _read_stss(data: bytes, start: int, end: int, sample_count: int) -> list[int]:
    count = _count(data, start, end, 4)
    if not count:
        raise IndexUnusable("an empty stss (keyframes must be parsed from the stream)")
    sync = list(_be_array("I", data, start + 8, count, 4))
    if any(b <= a for a, b in itertools.pairwise(sync)):
        raise IndexUnusable("stss is not ascending")
    if sync[0] < 0 or sync[-1] > sample_count or (sync[0] == 0 and sync[-1] >= sample_count):
        raise IndexUnusable("stss names samples the track does not have")
    return sync


def _read_stsz(data: bytes, start: int, end: int) -> tuple[array[int], int]:
    _full(data, start, end, 8)
    fixed, count = struct.unpack_from(">II", data, start + 4)
    if fixed:
        return array("I", [fixed]) * count, count
    if 12 + 4 * count > end - start:
        raise IndexUnusable("stsz is cut short")
    sizes = _be_array("I", data, start + 12, count, 4)
    if count and min(sizes) == 0:
        raise IndexUnusable("an empty sample")
    return sizes, count


def _read_stsc(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    count = _count(data, start, end, 12)
    raw = _be_array("I", data, start + 8, 3 * count, 4)
    runs = list(zip(raw[0::3], raw[1::3], strict=True))
    if not runs or runs[0][0] != 1 or any(b[0] <= a[0] for a, b in itertools.pairwise(runs)) \
            or any(n < 1 for _f, n in runs) or any(i != 1 for i in raw[2::3]):
        raise IndexUnusable("stsc entries FFmpeg would repair")
    return runs


def _read_offsets(data: bytes, start: int, end: int, kind: str, size: int) -> array[int]:
    count = _count(data, start, end, size)
    return _be_array(kind, data, start + 8, count, size)


def _read_elst(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    version = _full(data, start, end, 4)
    entry = 20 if version == 1 else 12
    (count,) = struct.unpack_from(">I", data, start + 4)
    if 8 + count * entry != end - start:
        raise IndexUnusable("elst size does not match its entry count")
    edits = []
    for i in range(count):
        pos = start + 8 + i * entry
        if version == 1:
            duration, media_time, rate = struct.unpack_from(">QqI", data, pos)
        else:
            duration, media_time, rate = struct.unpack_from(">IiI", data, pos)
        if rate != 1 << 16:
            raise IndexUnusable("an edit with a rate other than 1")
        if media_time < -1:
            raise IndexUnusable("an edit with a negative media time")
        edits.append((duration, media_time))
    return edits


def chunk_extents(layout: Layout) -> tuple[list[int], list[int]]:
    """(offset, byte length) of every chunk of a track."""
    chunks = len(layout.chunk_offsets)
    if layout.stsc[-1][0] > chunks:
        raise IndexUnusable("stsc names chunks that stco does not have")
    per_chunk: list[int] = []
    for (first, samples), nxt in itertools.zip_longest(layout.stsc, layout.stsc[1:]):
        last = nxt[0] if nxt is not None else chunks + 1
        per_chunk.extend(itertools.repeat(samples, last - first))
    if sum(per_chunk) != len(layout.sizes):
        raise IndexUnusable("chunks and samples disagree on the sample count")
    ends_at = list(itertools.accumulate(layout.sizes, initial=0))
    firsts = list(itertools.accumulate(per_chunk, initial=0))
    lengths = list(map(operator.sub, (ends_at[i] for i in firsts[1:]), (ends_at[i] for i in firsts[:-1])))
    return list(layout.chunk_offsets), lengths


def check_layout(layouts: list[Layout], mdats: list[tuple[int, int]], file_size: int) -> None:
    """The tracks' samples tile the media data exactly, inside the file.

    A muxer writes samples back to back; a sample size or chunk offset damaged in the
    index shows up as a gap or an overlap, and a truncated file as data past its end.
    Either way the demuxer would read other bytes than the index says: demux instead.
    """
    extents: list[tuple[int, int]] = []
    for layout in layouts:
        starts, lengths = chunk_extents(layout)
        extents.extend(zip(starts, lengths, strict=True))
    extents = sorted(e for e in extents if e[1])
    if not extents:
        raise IndexUnusable("no sample data")
    last_end = max(map(operator.add, *zip(*extents)))
    if last_end > file_size:
        raise IndexUnusable("sample data lies past the end of the file (truncated)")
    payload = sum(end - start for start, end in mdats)
    if sum(length for _start, length in extents) != payload:
        raise IndexUnusable("the samples do not fill the media data exactly")
    if any(a[0] + a[1] > b[0] for a, b in itertools.pairwise(extents)):
        raise IndexUnusable("samples overlap")
    if any(not any(s <= start and start + length <= e for s, e in mdats) for start, length in
           (extents[0], extents[-1])):
        raise IndexUnusable("samples lie outside the media data")
