"""Decode planned pieces, on one decoder or several side by side, checked against the table.

Each piece is decoded from its keyframe (a seek, or the file start) up to its last
needed frame. Every decoded frame is located in the frame table by its timestamp and
must come out in table order; a frame the table does not know, a needed frame that
never appears, or a seek that lands after its keyframe raises :class:`TableMismatch`
so the caller can fall back to sequential decoding instead of delivering a wrong frame.

Frames no piece needs are not converted; for codecs whose non-reference frames can be
dropped safely, the decoder is told to skip the ones nobody needs.

With several workers, piece ``i`` goes to worker ``i % workers``; each worker has its
own container and decoder (PyAV releases the GIL while decoding) and a small bounded
queue, and the consumer drains the queues in piece order. So delivery order is the
plan's order. What waits in the queues are decoded frames, not RGB images: a worker
running ahead holds at most ``QUEUE_DEPTH + 1`` frames in the decoder's own format
(1.5 bytes a pixel for 4:2:0, where the image takes 4), and each frame is converted
only when the consumer takes it, so the converted images in this stage are one.

Decoder threads are bounded too: a frame-threaded decoder gets at most
``MAX_FRAME_THREADS`` threads (FFmpeg's automatic count is one per core plus one, each
holding a frame in flight), a piece decoder running beside others gets one.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import VideoError
from ._pixels import frame_too_large, out_of_memory, rgb_image
from .damage import Damage
from .frametable import FrameTable, open_container, park, take_spare, video_stream
from .strategy import Piece

if TYPE_CHECKING:
    from PIL import Image

#: Codecs whose non-reference frames can be skipped without changing any other frame.
NONREF_SKIP_CODECS = ("h264", "hevc")
#: Pieces at least this long (frames) are decoded with frame threads on a single decoder.
THREADED_PIECE = 48
#: Decoded frames a worker may queue before the consumer takes them (it holds one more
#: while it waits for room).
QUEUE_DEPTH = 2
#: Frame threads of a single frame-threaded decoder, at most.
MAX_FRAME_THREADS = 4
_POLL_S = 0.05


class TableMismatch(Exception):
    """The decoder disagreed with the frame table."""


#: Turns a decoded PyAV frame into the display-oriented RGB image (tests count these).
def to_display_image(frame: Any, table: FrameTable) -> Image.Image:
    try:
        return table.orientation.apply(rgb_image(frame))
    except MemoryError:
        # Converted apart from the decode (parallel decoders queue raw frames): named here too.
        raise frame_too_large(table.path, frame.width, frame.height) from None


#: Which frame of the table a decoded PyAV frame is; called once per frame the decoder outputs
#: (tests count decodes here).
def located(frame: Any, table: FrameTable) -> int | None:
    return table.index_of(frame.pts) if frame.pts is not None else None


class PieceDecoder:
    """One container + decoder that decodes pieces one after another."""

    def __init__(self, table: FrameTable, *, frame_threads: bool, skip_nonref: bool = True,
                 damage: Damage | None = None) -> None:
        self.table = table
        self.damage = damage if damage is not None else Damage()
        self.frame_threads = frame_threads
        self.skip_nonref = skip_nonref and table.codec in NONREF_SKIP_CODECS
        self._container: Any = None
        self._stream: Any = None
        self._fresh = False

    def close(self, park_it: bool = False) -> None:
        """Close the decoder, or (``park_it``: its pieces all decoded) park it for the next decode."""
        if self._container is not None:
            if park_it:
                park(self.table.path, self._container, self._stream, self.frame_threads)
            else:
                self._container.close()
            self._container = None

    def _open(self) -> None:
        self.close()
        # The container the table was read with (single-threaded), or a decoder an earlier decode
        # of this video parked (``kept_open``), saves an open and a decoder start.
        spare = take_spare(self.table.path, self.frame_threads)
        if spare is not None:
            self._container, self._stream = spare
            # A parked decoder may still skip non-reference frames for its last user.
            self._stream.codec_context.skip_frame = "DEFAULT"
            self._fresh = False
            return
        self._container = open_container(self.table.path)
        self._stream = video_stream(self._container, self.table.path)
        ctx = self._stream.codec_context
        if self.frame_threads:
            ctx.thread_type = "AUTO"
            ctx.thread_count = frame_threads()
        else:
            ctx.thread_type = "SLICE"
            ctx.thread_count = 1
        self._fresh = True

    def _packets(self, piece: Piece) -> Iterator[Any]:
        """Packets from the keyframe before ``piece.start`` on (a seek, or the file start).

        Seeking to the keyframe's presentation time lands on it in MP4, MOV and Matroska;
        the decode time (earlier with B-frames) would land a whole GOP early. A landing
        after the keyframe is retried with the earlier time before the table is doubted.
        """
        table = self.table
        limit = table.pts[piece.start]
        if self._container is None:
            self._open()
        if piece.start == 0 and self._fresh:
            targets: tuple[int | None, ...] = (None,)
        else:
            k = table.keyframe_at_or_before(piece.start)
            targets = (table.pts[table.keyframes[k]], table.seek_points[k])
        self._fresh = False
        for target in targets:
            if target is not None:
                self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
            packets = self._container.demux(self._stream)
            first = next((p for p in packets if p.size), None)
            # Discarded (edit-list pre-roll) packets count: they are decoded, not shown.
            if first is not None and first.is_keyframe and first.pts is not None and first.pts <= limit:
                return itertools.chain((first,), packets)
        raise TableMismatch(f"a seek in {table.path} did not land on a keyframe at or before the wanted frame")

    def frames(self, piece: Piece) -> Iterator[tuple[int, Image.Image]]:
        """Decode ``piece``; yield ``(index, image)`` for each needed frame, in order."""
        for index, frame in self.decoded(piece):
            yield index, to_display_image(frame, self.table)

    def decoded(self, piece: Piece) -> Iterator[tuple[int, Any]]:
        """Decode ``piece``; yield ``(index, decoded frame)`` for each needed frame, in order."""
        import av

        table = self.table
        try:
            packets = self._packets(piece)
        except av.error.FFmpegError as exc:
            # The index promised a seek it cannot do: decode from the start instead.
            raise TableMismatch(f"a seek in {table.path} failed: {exc}") from None
        ctx = self._stream.codec_context
        needed = piece.needed
        needed_pts = {table.pts[i] for i in needed}
        want = 0  # position in ``needed`` of the next frame to deliver
        prev = -1
        try:
            for packet in packets:
                if self.skip_nonref:
                    ctx.skip_frame = "DEFAULT" if packet.pts in needed_pts else "NONREF"
                try:
                    decoded = ctx.decode(packet)
                except av.error.InvalidDataError:
                    # A damaged packet: skip it; a needed frame it held is missed below.
                    self.damage.skip()
                    continue
                for frame in decoded:
                    index = located(frame, table)
                    if index is None:
                        raise TableMismatch(f"{table.path}: decoded a frame (pts {frame.pts}) "
                                            "that the frame table does not have")
                    if index <= prev:
                        raise TableMismatch(f"{table.path}: frames came out of order")
                    if (index > piece.start and prev >= piece.start and not self.skip_nonref
                            and index != prev + 1):
                        raise TableMismatch(f"{table.path}: the decoder skipped frames the table has")
                    if prev < piece.start <= index and index != piece.start:
                        raise TableMismatch(f"{table.path}: keyframe {piece.start} was not decoded")
                    prev = index
                    if index < needed[want]:
                        continue
                    if index > needed[want]:
                        raise TableMismatch(f"{table.path}: frame {needed[want]} was never decoded")
                    yield index, frame
                    want += 1
                    if want == len(needed):
                        return
        except (av.error.FFmpegError, MemoryError) as exc:
            if out_of_memory(exc):
                raise frame_too_large(table.path, ctx.width, ctx.height) from None
            raise VideoError(f"cannot decode video {table.path}: {exc}") from None
        raise TableMismatch(f"{table.path}: the video ended before frame {needed[want]}")


def decode_pieces(table: FrameTable, pieces: Sequence[Piece], workers: int, skip_nonref: bool = True,
                  damage: Damage | None = None) -> Generator[tuple[int, Image.Image], None, None]:
    """Yield ``(frame index, image)`` for every needed frame of ``pieces``, in plan order.

    The caller owns (and must close) each yielded image. Closing the generator early
    stops the workers and closes what they had queued.
    """
    if workers <= 1:
        # Frame threading pays for its start-up (and the frames it decodes ahead) only on
        # long spans; a handful of seeks decodes fastest on one thread.
        threaded = any(piece.cost >= THREADED_PIECE for piece in pieces)
        yield from _serial(table, pieces, skip_nonref, damage, threaded)
    else:
        yield from _parallel(table, pieces, workers, skip_nonref, damage)


def frame_threads() -> int:
    """Threads for a frame-threaded decoder: one per core available, at most ``MAX_FRAME_THREADS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_FRAME_THREADS))


def _serial(table: FrameTable, pieces: Sequence[Piece], skip_nonref: bool,
            damage: Damage | None, threaded: bool) -> Iterator[tuple[int, Image.Image]]:
    decoder = PieceDecoder(table, frame_threads=threaded, skip_nonref=skip_nonref, damage=damage)
    done = False
    try:
        for piece in pieces:
            yield from decoder.frames(piece)
        done = True
    finally:
        # Only a decoder that did all it was asked is parked: after an error its state is unknown.
        decoder.close(park_it=done)


def _put_until(q: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _drain(q: queue.Queue[Any]) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


_END = "end"
_ERROR = "error"


def _parallel(table: FrameTable, pieces: Sequence[Piece], workers: int,
              skip_nonref: bool, damage: Damage | None) -> Iterator[tuple[int, Image.Image]]:
    stop = threading.Event()
    queues: list[queue.Queue[Any]] = [queue.Queue(maxsize=QUEUE_DEPTH) for _ in range(workers)]

    def work(w: int) -> None:
        decoder = PieceDecoder(table, frame_threads=False, skip_nonref=skip_nonref, damage=damage)
        q = queues[w]
        done = False
        try:
            for piece in pieces[w::workers]:
                for item in decoder.decoded(piece):
                    if not _put_until(q, item, stop):
                        return
                if not _put_until(q, _END, stop):
                    return
            done = True
        except BaseException as exc:
            _put_until(q, (_ERROR, exc), stop)
        finally:
            decoder.close(park_it=done)

    threads = [threading.Thread(target=work, args=(w,), name=f"glasskit-decode-{w}", daemon=True)
               for w in range(workers)]
    for thread in threads:
        thread.start()
    try:
        for i in range(len(pieces)):
            q = queues[i % workers]
            while True:
                item = q.get()
                if item == _END:
                    break
                if item[0] == _ERROR:
                    raise item[1]
                index, frame = item
                del item
                yield index, to_display_image(frame, table)
                del frame
    finally:
        stop.set()
        for q in queues:
            _drain(q)
        for thread in threads:
            thread.join()
        for q in queues:
            _drain(q)
