"""The paced clock (``--pace F``): frames come due at their media time divided by F, as on a device.

From the first frame's delivery, a frame is due at ``media_time / F`` seconds. Each stream has
one waiting slot: a frame that comes due while the adapter is still busy with an earlier one
replaces the frame waiting there (the newest wins; the replaced one counts as dropped). An
emission's time is the media time at which its answer arrived, so processing time becomes
latency; staleness is that time minus the answered frame's media time.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

from ..adapters.calls import StreamCaller
from ..plan.feeds import FeedFrame
from ..results import StreamResult
from .streams import Stream, StreamFeeder, StreamWork, decoded


class _Frame:
    """A decoded frame shared by the streams that take it; its image closes when the last lets go."""

    def __init__(self, image: Any, holders: int) -> None:
        self.image = image
        self.holders = holders

    def release(self) -> None:
        self.holders -= 1
        if self.holders <= 0:
            self.image.close()


class _Slot:
    """A stream's one waiting frame (newest wins) and the end-of-feed mark."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.waiting: tuple[FeedFrame, _Frame] | None = None
        self.ended = False
        self.ready = asyncio.Event()

    def offer(self, frame: FeedFrame, shared: _Frame) -> None:
        if not self.stream.active:
            shared.release()
            return
        if self.waiting is not None:
            self.stream.dropped += 1
            self.waiting[1].release()
        self.waiting = (frame, shared)
        self.ready.set()

    def end(self) -> None:
        self.ended = True
        self.ready.set()


async def run_paced(work: StreamWork, caller: StreamCaller) -> list[StreamResult]:
    assert work.pace is not None
    pace = work.pace
    feeder = StreamFeeder(work, caller)
    await feeder.start()
    loop = asyncio.get_running_loop()
    takers: dict[Fraction, list[tuple[Stream, FeedFrame]]] = {}
    for stream in feeder.streams:
        for frame in stream.frames:
            takers.setdefault(frame.media_time, []).append((stream, frame))
    slots = {id(s): _Slot(s) for s in feeder.streams}
    clock: list[float] = []

    def media_now() -> Fraction:
        return Fraction(loop.time() - clock[0]) * Fraction(pace) if clock else Fraction(0)

    async def consume(slot: _Slot) -> None:
        stream = slot.stream
        while True:
            if slot.waiting is None:
                if slot.ended:
                    return
                # Cleared only with nothing waiting, so neither an offer nor the end is missed.
                slot.ready.clear()
                await slot.ready.wait()
                continue
            frame, shared = slot.waiting
            slot.waiting = None
            try:
                values = await feeder.frame(stream, frame, shared.image)
                arrived = media_now()
                if values is None:
                    continue
                stream.answers.append((arrived, frame.media_time))
                # The answered frame is still held: a false alarm's frame is the one the app was looking at.
                feeder.emitted(stream, frame, shared.image, arrived, values)
            finally:
                shared.release()

    consumers = [asyncio.create_task(consume(slot)) for slot in slots.values()]
    try:
        async for want, decoded_frame in decoded(work, sorted(takers)):
            if not clock:
                clock.append(loop.time() - float(want) / pace)
            delay = clock[0] + float(want) / pace - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            shared = _Frame(decoded_frame.image, len(takers[want]))
            for stream, frame in takers[want]:
                feeder.decoded(stream, frame, decoded_frame.image)
                slots[id(stream)].offer(frame, shared)
            for task in consumers:
                if task.done() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        for slot in slots.values():
            slot.end()
        await asyncio.gather(*consumers)
    finally:
        for task in consumers:
            task.cancel()
        for slot in slots.values():
            if slot.waiting is not None:
                slot.waiting[1].release()
                slot.waiting = None
    return await feeder.finish()
