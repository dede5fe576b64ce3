"""The abandonable executor: jobs reuse idle daemon threads, a hung job never holds up the next."""

from __future__ import annotations

import asyncio
import threading

import pytest

from glasskit_eval.support.threads import DaemonThreadExecutor, to_daemon_thread


def test_jobs_one_after_another_share_one_daemon_thread() -> None:
    pool = DaemonThreadExecutor()
    seen = [pool.submit(threading.current_thread).result(timeout=10) for _ in range(20)]
    assert len({id(t) for t in seen}) == 1
    assert seen[0].daemon and seen[0].name == "glasskit-call"
    assert seen[0] is not threading.current_thread()


def test_a_hung_job_keeps_its_thread_and_the_next_job_runs_beside_it() -> None:
    pool = DaemonThreadExecutor()
    release = threading.Event()
    try:
        hung = pool.submit(lambda: (release.wait(30), threading.current_thread())[1])
        other = pool.submit(threading.current_thread).result(timeout=10)
        assert not hung.done()
    finally:
        release.set()
    assert hung.result(timeout=10) is not other


def test_as_many_threads_as_jobs_in_flight() -> None:
    # Each job waits for all the others, so they can only finish if every one has a thread.
    pool = DaemonThreadExecutor()
    barrier = threading.Barrier(12, timeout=20)
    futures = [pool.submit(lambda: (barrier.wait(), threading.current_thread())[1]) for _ in range(12)]
    assert len({id(f.result(timeout=30)) for f in futures}) == 12


def test_an_idle_thread_ends_after_idle_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DaemonThreadExecutor, "IDLE_S", 0.05)
    pool = DaemonThreadExecutor()
    thread = pool.submit(threading.current_thread).result(timeout=10)
    thread.join(timeout=10)
    assert not thread.is_alive()
    # The pool still serves jobs after its threads have gone.
    assert pool.submit(lambda: 6 * 7).result(timeout=10) == 42


def test_a_job_raising_reaches_its_future_and_the_thread_serves_on() -> None:
    pool = DaemonThreadExecutor()

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pool.submit(boom).result(timeout=10)
    assert pool.submit(lambda: "next").result(timeout=10) == "next"


def test_to_daemon_thread_returns_the_result_in_the_callers_context() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    async def main() -> list[str]:
        var.set("caller")
        return [await to_daemon_thread(var.get) for _ in range(3)]

    assert asyncio.run(main()) == ["caller"] * 3
