"""SIGINT and SIGTERM as an orderly stop: cancel the work, keep what finished.

Inside the event loop a signal cancels the main task once; the runner then
cancels in-flight adapter calls, closes the adapter and the caller reports the
checkpoint. A second signal exits at once with status 130 (:func:`force_exit`), even
when adapter code holds the event loop (an ``async evaluate`` that never awaits).
Outside the loop (planning, reporting) SIGTERM is turned into ``KeyboardInterrupt``
so that both signals take the same path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

from ..errors import Interrupted

T = TypeVar("T")

_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None))
                 if s is not None)

#: The exit status of a forced exit: what a shell reports for a process ended by SIGINT.
FORCED_EXIT_STATUS = 130

# Whether stderr's cursor sits at the end of a line we drew (the live progress line): a
# message written from a signal handler then starts on a new line instead of gluing onto it.
_open_line = [False]


def note_open_line(is_open: bool) -> None:
    """Tell the signal handlers whether the terminal's last line is unfinished."""
    _open_line[0] = is_open


def _own_line(message: str) -> bytes:
    return (("\n" if _open_line[0] else "") + message).encode()


# Run before a forced exit, which skips atexit: e.g. killing command adapters' process groups.
_forced_exit_hooks: list[Callable[[], None]] = []


def on_forced_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` (once registered, every time) before :func:`force_exit` ends the process."""
    if hook not in _forced_exit_hooks:
        _forced_exit_hooks.append(hook)


def force_exit(reason: str) -> None:
    """End the process now with status 130: say why, run the hooks, skip everything else.

    Records already made durable stay in the checkpoint, as after SIGKILL.
    """
    # Called from a signal handler, which may have interrupted a write to sys.stderr: go below it.
    with contextlib.suppress(OSError):
        os.write(2, _own_line(f"{reason}: exiting now without cleaning up (status {FORCED_EXIT_STATUS})\n"))
    for hook in list(_forced_exit_hooks):
        with contextlib.suppress(Exception):
            hook()
    os._exit(FORCED_EXIT_STATUS)


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

    The second one forces an exit (130): closing the adapter is bounded, but a user who
    asks twice does not wait for it. The handlers are plain ``signal`` handlers, not the
    loop's, because those only run when the loop gets control back, and adapter code can
    keep it (a coroutine that never awaits).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[str] = []

    def cancel() -> None:
        if task is not None:
            task.cancel()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if received:
            force_exit(f"{name} received again")
        received.append(name)
        # os.write, not print: a handler that interrupts a write to sys.stderr must not write to it.
        with contextlib.suppress(OSError):
            os.write(2, _own_line(f"{name} received: stopping; send it again to exit at once\n"))
        _open_line[0] = False
        loop.call_soon_threadsafe(cancel)

    previous: list[tuple[signal.Signals, Any]] = []
    if threading.current_thread() is threading.main_thread():
        for sig in _SIGNALS:
            previous.append((sig, signal.signal(sig, on_signal)))
    try:
        with wake_loop_on_signals(loop):
            return await work
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)


@contextlib.contextmanager
def wake_loop_on_signals(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Wake ``loop`` whichever thread the kernel hands a signal to (from the main thread; elsewhere a no-op).

    A signal sent to the process may be taken by any thread that does not block it (an
    adapter's import or factory waiting on a worker thread, say). Python runs the handler
    only when the main thread next runs bytecode, and a loop asleep in ``epoll`` with
    nothing scheduled would never get there: the command would ignore Ctrl+C. The
    wakeup fd is written by the C-level handler in whatever thread it runs in.
    """
    with contextlib.ExitStack() as cleanup:
        reader, writer = (cleanup.enter_context(end) for end in socket.socketpair())
        reader.setblocking(False)
        writer.setblocking(False)
        try:
            previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except ValueError:  # not the main thread: its signals are not ours to route
            yield
            return
        cleanup.callback(signal.set_wakeup_fd, previous)
        try:
            loop.add_reader(reader.fileno(), _drain, reader)
        except NotImplementedError:  # a loop without add_reader (Windows' proactor)
            yield
            return
        cleanup.callback(loop.remove_reader, reader.fileno())
        yield


def _drain(reader: socket.socket) -> None:
    # The bytes are signal numbers; waking up was their whole job.
    with contextlib.suppress(OSError):
        while reader.recv(4096):
            pass
