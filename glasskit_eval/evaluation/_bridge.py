"""The one hand-off from a decoding thread to the event loop: small bounded queues, one per taker.

Decoding (which releases the GIL) runs on a worker thread and overlaps the adapter calls; the
worker blocks while a taker's queue is full, so memory stays a few frames per taker. Every item is
a ``(sample, frames)`` pair whose frames have a ``release()``: items nobody took are released when
the hand-off closes, and a taker that stops early stops the producer (the others with it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_DONE = object()


class Handoff:
    """Items made by ``produce`` on a worker thread, delivered to ``takers`` bounded queues on the loop."""

    def __init__(self, takers: int, depth: int) -> None:
        self.takers = takers
        self.depth = depth
        self._queues: list[asyncio.Queue[Any]] = []
        self._stop = threading.Event()
        self._producer: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, produce: Callable[[Handoff], None]) -> None:
        """Run ``produce(self)`` on a worker thread; it calls :meth:`put`, then returns (or raises)."""
        loop = self._loop = asyncio.get_running_loop()
        self._queues = [asyncio.Queue(maxsize=self.depth) for _ in range(self.takers)]

        def run() -> None:
            try:
                produce(self)
                for taker in range(self.takers):
                    self._put(taker, _DONE)
            except BaseException as exc:
                for taker in range(self.takers):
                    self._put(taker, _Failed(exc))

        self._producer = loop.run_in_executor(None, run)

    def put(self, taker: int, item: Any) -> bool:
        """From the worker thread: hand ``item`` to ``taker``; False once the hand-off stopped (keep it)."""
        return self._put(taker, item)

    def _put(self, taker: int, item: Any) -> bool:
        if self._stop.is_set():
            return False
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._queues[taker].put(item), self._loop)
        while True:
            try:
                future.result(timeout=0.05)
                return True
            except concurrent.futures.TimeoutError:
                if self._stop.is_set():
                    future.cancel()
                    return False

    async def items(self, taker: int) -> AsyncGenerator[Any, None]:
        """``taker``'s items in order; stopping early stops the producer for every taker."""
        queue = self._queues[taker]
        finished = False
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    finished = True
                    return
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            if not finished:
                self._stop.set()

    async def close(self) -> None:
        """Stop the producer and release every item no taker took."""
        self._stop.set()
        producer = self._producer
        while producer is not None and not producer.done():
            self._drain()
            await asyncio.wait({producer}, timeout=0.05)
        self._drain()
        if producer is not None and not producer.cancelled():
            producer.exception()

    def _drain(self) -> None:
        for queue in self._queues:
            while not queue.empty():
                item = queue.get_nowait()
                if isinstance(item, tuple):
                    item[1].release()


def feed_all(make_items: Callable[[], Iterator[Any]]) -> Callable[[Handoff], None]:
    """A producer handing every item of ``make_items()`` to the one taker (released if refused)."""

    def produce(handoff: Handoff) -> None:
        gen = make_items()
        try:
            for item in gen:
                if not handoff.put(0, item):
                    item[1].release()
                    return
        finally:
            close = getattr(gen, "close", None)
            if close is not None:
                close()

    return produce


async def in_background(make_items: Callable[[], Iterator[Any]], depth: int) -> AsyncGenerator[Any, None]:
    """Run a ``(sample, frames)`` generator on a worker thread, at most ``depth`` items ahead of the loop."""
    handoff = Handoff(1, depth)
    handoff.start(feed_all(make_items))
    try:
        async for item in handoff.items(0):
            yield item
    finally:
        await handoff.close()
