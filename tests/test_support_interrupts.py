"""support.interrupts: a signal taken by any thread reaches the event loop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
from pathlib import Path
from types import FrameType

import pytest

from glasskit_eval.support.interrupts import wake_loop_on_signals

linux_threads = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="signals one thread (Linux)")


@linux_threads
def test_a_signal_taken_by_a_worker_thread_wakes_the_sleeping_loop() -> None:
    handled = threading.Event()

    def on_usr1(signum: int, frame: FrameType | None) -> None:
        handled.set()  # runs in the main thread, once it runs bytecode again

    async def main() -> str:
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[str] = loop.create_future()
        main_thread = threading.get_native_id()

        def worker() -> None:
            # Only once the main thread sleeps in epoll: a signal that comes while it runs
            # bytecode is handled at once and proves nothing.
            wchan = Path(f"/proc/self/task/{main_thread}/wchan")
            for _ in range(1000):
                if "epoll" in wchan.read_text():
                    break
                handled.wait(0.01)
            os.kill(threading.get_native_id(), signal.SIGUSR1)  # to this thread, not the process
            # Nothing else will wake the loop: without the wakeup fd it sleeps until this gives up.
            woken = handled.wait(10)
            loop.call_soon_threadsafe(outcome.set_result, "handled" if woken else "the loop slept through it")

        with wake_loop_on_signals(loop):
            thread = threading.Thread(target=worker)
            thread.start()
            result = await outcome
        thread.join()
        return result

    previous = signal.signal(signal.SIGUSR1, on_usr1)
    try:
        assert asyncio.run(main()) == "handled"
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_the_previous_wakeup_fd_is_put_back() -> None:
    own_reader, own_writer = socket.socketpair()
    own_writer.setblocking(False)
    seen: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with wake_loop_on_signals(loop):
            current = signal.set_wakeup_fd(-1)
            signal.set_wakeup_fd(current)
            seen.append(current)

    signal.set_wakeup_fd(own_writer.fileno())
    try:
        asyncio.run(main())
        assert seen[0] not in (-1, own_writer.fileno())  # its own fd while active
        assert signal.set_wakeup_fd(-1) == own_writer.fileno()
    finally:
        signal.set_wakeup_fd(-1)
        own_reader.close()
        own_writer.close()


def test_off_the_main_thread_it_changes_nothing() -> None:
    results: list[int] = []

    def in_thread() -> None:
        async def main() -> None:
            with wake_loop_on_signals(asyncio.get_running_loop()):
                results.append(1)

        asyncio.run(main())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert results == [1]
    assert signal.set_wakeup_fd(-1) == -1
