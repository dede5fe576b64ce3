"""The thread pool behind adapter calls, decoding hand-offs and PNG encoding.

Synchronous adapter code can block for ever (a hung network call in ``evaluate``).
After an interrupt or a fail-fast error we abandon such calls, but the stock pool
would still keep the process alive: ``asyncio.run`` and ``concurrent.futures``
both join their worker threads on the way out, so Ctrl+C could never end a run.
This executor runs jobs on daemon threads and never waits for them: a job that hangs keeps
its thread, and the next job goes to another thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class DaemonThreadExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor look-alike (asyncio insists on the type) with abandonable jobs.

    Callers bound the number of jobs in flight themselves (``--concurrency``, the decoder's
    queue), so there is no cap: a job goes to an idle thread when there is one, else to a new
    one. Idle threads are kept for ``IDLE_S``: a stream makes two short jobs per frame, and
    starting a thread for each (the caller waits until it runs) stalls the event loop for a
    scheduling round trip every time on a busy machine.
    """

    IDLE_S = 2.0

    def __init__(self) -> None:
        # The base class starts no threads until its own submit(), which we replace.
        super().__init__(max_workers=1, thread_name_prefix="glasskit")
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: Threads waiting for a job that no submit() has claimed yet.
        self._idle = 0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

        with self._lock:
            claimed = self._idle > 0
            if claimed:
                self._idle -= 1
        self._jobs.put(work)
        if not claimed:
            threading.Thread(target=self._serve, name="glasskit-call", daemon=True).start()
        return future

    def _serve(self) -> None:
        # Jobs queued + unclaimed idle threads == threads waiting here, so every job is taken.
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:
                        self._idle -= 1
                        return
                # A submit() claimed this thread after the timeout: its job is queued.
                continue
            job()
            del job  # the finished job's future and arguments are not kept alive while idle
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        # Nothing to join: finished jobs are gone, abandoned ones die with the process.
        return None


def install(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Make the running loop's default executor abandonable."""
    (loop or asyncio.get_running_loop()).set_default_executor(DaemonThreadExecutor())


_shared: DaemonThreadExecutor | None = None


async def to_daemon_thread(func: Callable[..., T], /, *args: Any) -> T:
    """``asyncio.to_thread`` on an abandonable daemon thread, whatever the loop's default executor.

    For adapter code (imports, factories, calls): ``asyncio.run`` joins the default executor's
    threads on the way out, so a hung factory would keep even an interrupted ``validate`` alive.
    """
    global _shared
    if _shared is None:
        _shared = DaemonThreadExecutor()
    call = functools.partial(contextvars.copy_context().run, func, *args)
    return await asyncio.get_running_loop().run_in_executor(_shared, call)
