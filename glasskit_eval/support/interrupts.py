"""SIGINT and SIGTERM as an orderly stop: cancel the work, keep what finished.

Inside the event loop a signal cancels the main task once; the runner then
cancels in-flight adapter calls, closes the adapter and the caller reports the
checkpoint. Outside the loop (planning, reporting) SIGTERM is turned into
``KeyboardInterrupt`` so that both signals take the same path.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Iterator
from types import FrameType
from typing import Any, TypeVar

from ..errors import Interrupted

T = TypeVar("T")

_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None))
                 if s is not None)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_keyboard_interrupt() -> Iterator[None]:
    """While active, SIGTERM raises KeyboardInterrupt like SIGINT does (main thread only)."""
    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(sigterm, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(sigterm, previous)


def reinstall_sigterm() -> None:
    """asyncio resets SIGTERM to the default when a loop closes; put ours back."""
    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is not None and threading.current_thread() is threading.main_thread():
        signal.signal(sigterm, _raise_interrupt)


async def interruptible(work: Awaitable[T]) -> T:
    """Await ``work``; the first SIGINT/SIGTERM cancels it and raises :class:`Interrupted`.

    Later signals are ignored so that closing the adapter is not itself cut short
    (the process adapter bounds its own shutdown time).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[str] = []

    def on_signal(name: str) -> None:
        if not received and task is not None:
            received.append(name)
            task.cancel()

    installed: list[Any] = []
    for sig in _SIGNALS:
        try:
            loop.add_signal_handler(sig, on_signal, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or a platform without loop signal handlers
    try:
        return await work
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
