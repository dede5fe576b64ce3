"""Command adapters: run the adapter command as a child process speaking protocol v1.

This module is the I/O edge around :class:`~._protocol.Connection`: it starts the
process, pumps its stdout into the connection, writes requests to its stdin, mirrors
its stderr, and makes sure the process and everything it started are gone when the
evaluator closes.

No wait here is open-ended unless it is tied to the process: calls wait for an answer
or for the process to exit (a call may legitimately take minutes, and a fail-fast error
or an interrupt cancels it through :meth:`CommandEvaluator.cancel_pending`); ``close``
waits ``grace_s`` for a clean exit, then sends SIGTERM and, after ``terminate_grace_s``,
SIGKILL to the whole process group and to every process carrying the adapter's
environment tag (descendants that left the group with ``setsid()``).

The process is watched by its exit status, not by its pipes: ``Process.wait()`` also
waits for stdout to close, which an orphaned descendant holding it delays for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import AdapterError, AdapterGone, ProtocolBroken
from ._linewriter import LineWriter
from ._procio import (
    GroupReaper,
    StderrMirror,
    describe_returncode,
    enlarge_pipe,
    live_group_members,
    pipe_holders,
    read_chunks,
    track_group,
)
from ._protocol import (
    PROTOCOL_VERSION,
    Capabilities,
    Connection,
    Event,
    Reply,
    State,
    encode_params,
)
from ._wire import batch_params, sample_parts, share_usage
from .base import FactoryConfig, Sample, Target, add_usage, frames_too_large

__all__ = ["CommandEvaluator"]

if TYPE_CHECKING:
    from .command import CommandAdapterSpec

_live_group_members = live_group_members  # used by the tests

# After the process exits, how long to let its last stdout/stderr bytes arrive.
_DRAIN_AFTER_EXIT_S: Final = 0.5
# After a failed write or a closed stdout, how long to wait for the exit status that
# makes the error message precise.
_EXIT_STATUS_WAIT_S: Final = 1.0
_KILL_WAIT_S: Final = 2.0
# How often the exit status is looked at while the adapter runs.
_EXIT_POLL_S: Final = 0.05
#: Frames encoded or being written at once, whatever ``--concurrency`` (each is about half a
#: frame's pixels in base64); calls beyond these wait holding only their image.
PAYLOADS_IN_FLIGHT: Final = 2


class CommandEvaluator:
    """A running command adapter; an :class:`~.base.Evaluator` for one trial."""

    def __init__(self, proc: asyncio.subprocess.Process, spec: CommandAdapterSpec,
                 label: str, tag: str | None = None) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        self._stdin = proc.stdin
        self._spec = spec
        self.pid = proc.pid
        self.initialize_result: Any = None
        self._label = f"{label} (pid {proc.pid})"
        self._conn = Connection(
            max_incoming_bytes=spec.max_message_bytes, max_outgoing_bytes=spec.max_message_bytes
        )
        self._futures: dict[int, asyncio.Future[Reply]] = {}
        self._lines = LineWriter(self._stdin)
        self._payloads = asyncio.Semaphore(PAYLOADS_IN_FLIGHT)
        self._failure: AdapterError | None = None
        self._failure_delivered = False
        self._failed = asyncio.Event()
        self._stopping = False
        self._closed = False
        track_group(proc.pid, tag)
        enlarge_pipe(self._stdin.transport)
        self._stderr = StderrMirror(spec.stderr)
        self._stderr_task = asyncio.ensure_future(self._stderr.pump(proc.stderr))
        self._stdout_task = asyncio.ensure_future(self._pump_stdout(proc.stdout))
        self._exit_task = asyncio.ensure_future(self._exited())
        # The leader's exit is seen by the exit task (its status), not by Process.wait().
        self._reaper = GroupReaper(proc, tag, self._exit_task.done)
        self._stdin_task = asyncio.ensure_future(self._stdin_closed())
        self._watch_task = asyncio.ensure_future(self._watch())

    # -- the Evaluator interface ---------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        caps = self._conn.capabilities
        assert caps is not None, "capabilities are known once create() returns"
        return caps

    @property
    def batch(self) -> bool:
        """``evaluateMany`` takes precedence when the adapter reports both."""
        return self.capabilities.evaluate_many

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        self._check_usable()
        await self._payloads.acquire()
        try:
            # The runner closes the image once this call returns, and the encode finishes
            # before we await anything else.
            try:
                parts = await asyncio.get_running_loop().run_in_executor(
                    None, sample_parts, sample, self._spec.png_compress_level
                )
            except MemoryError:
                raise frames_too_large([sample], "encoding the frame as PNG for the command adapter") from None
            params = [b'{"sample":', *parts, b',"target":', encode_params(target.to_wire()), b"}"]
            del parts
        except BaseException:
            self._payloads.release()
            raise
        # The slot is free again once the line is in the pipe, not when the answer comes.
        reply = await self._request("evaluate", params, on_sent=self._payloads.release)
        if reply.usage is not None:
            add_usage(sample.usage, reply.usage)
        return reply.result

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        self._check_usable()
        params = await batch_params(samples, target, self._spec.png_compress_level,
                                    self._spec.max_message_bytes, self._check_usable)
        reply = await self._request("evaluateMany", params, expected_results=len(samples))
        share_usage(samples, reply.usage)
        return list(reply.result)

    async def cancel_pending(self) -> None:
        """Abandon every call in flight: tell the adapter, release the callers."""
        self._stopping = True
        for request_id, method in list(self._conn.pending.items()):
            if method not in ("initialize", "close"):
                self._abandon(request_id)
                future = self._futures.pop(request_id, None)
                if future is not None and not future.done():
                    future.set_exception(
                        AdapterError(f"{method} was cancelled: the run is stopping")
                    )

    async def close(self) -> None:
        """Ask the adapter to close, then make sure its whole process group is gone.

        Raises :class:`AdapterError` when closing was not clean: the adapter answered
        ``close`` with an error, did not exit with status 0 within ``grace_s``, or had
        failed earlier without any call reporting it.
        """
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        problems: list[str] = []
        try:
            await self.cancel_pending()
            problems = await self._close_gracefully()
            await self._reaper.terminate(self._spec.terminate_grace_s)
        finally:
            # Reached with the graceful path cut short (cancelled, or an interrupt):
            # nothing may outlive us.
            self._reaper.kill_now()
            await self._stop_tasks()
        if self._failure is not None and not self._failure_delivered:
            self._failure_delivered = True
            raise self._failure
        if problems:
            raise AdapterError(f"{self._label} did not close cleanly: " + "; ".join(problems))

    # -- start-up -------------------------------------------------------------

    async def _initialize(self, factory_config: FactoryConfig) -> None:
        artifacts = factory_config.artifacts_dir
        try:
            params = encode_params(
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "config": {
                        "evalDir": str(Path(factory_config.eval_dir).resolve()),
                        "config": dict(factory_config.config),
                        "artifactsDir": None if artifacts is None else str(Path(artifacts).resolve()),
                        "verbose": bool(factory_config.verbose),
                    },
                }
            )
        except AdapterError as exc:
            raise AdapterError(f"the adapter config cannot be sent to {self._label}: {exc}") from None
        try:
            # Kept for --cache: a declared adapterVersion is part of the adapter's identity.
            self.initialize_result = await self._call("initialize", params)
        except AdapterError as exc:
            if exc is self._failure:
                raise
            # Same class, so a broken protocol still reads as a ProtocolError.
            raise type(exc)(f"{self._label} failed to initialize: {exc}") from None

    async def _shutdown_after_failed_init(self) -> None:
        self._closed = True
        self._stopping = True
        await self._close_gracefully()
        await self._reaper.terminate(self._spec.terminate_grace_s)
        await self._stop_tasks()

    # -- calls ----------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._failure is not None:
            self._failure_delivered = True
            raise self._failure
        if self._stopping:
            raise AdapterError(f"{self._label} is shutting down; no new calls are sent")

    async def _call(self, method: str, params: bytes, *, expected_results: int | None = None) -> Any:
        return (await self._request(method, params, expected_results=expected_results)).result

    async def _request(self, method: str, params: bytes | list[bytes], *,
                       expected_results: int | None = None,
                       on_sent: Callable[[], None] | None = None) -> Reply:
        """Send a request and wait for its answer; ``on_sent`` is called once the line is written.

        Params given as a list of pieces are consumed, each piece dropped once written.
        """
        unsent = [on_sent] if on_sent is not None else []

        def mark_sent() -> None:
            while unsent:
                unsent.pop()()

        try:
            if method != "close":
                self._check_usable()
            request_id, pieces = self._conn.request_pieces(
                method, params, expected_results=expected_results
            )
            if isinstance(params, list):
                params.clear()
            future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            self._futures[request_id] = future
            try:
                if self._stdin.is_closing():
                    await self._wait_for_failure(f"{self._label} closed its stdin")
                else:
                    # Shielded: a line cut short would corrupt every message after it.
                    writing = asyncio.ensure_future(self._write_pieces(pieces))
                    del pieces
                    # Its error, if its caller stopped waiting, is the connection's failure.
                    writing.add_done_callback(lambda task: task.cancelled() or task.exception())
                    await asyncio.shield(writing)
                mark_sent()
                return await future
            except asyncio.CancelledError:
                # The caller gave up (fail-fast elsewhere, or an interrupt): let the
                # adapter stop working on it.
                self._abandon(request_id)
                raise
            except AdapterError as exc:
                if exc is self._failure:
                    self._failure_delivered = True
                raise
            finally:
                self._futures.pop(request_id, None)
        finally:
            mark_sent()

    async def _write_pieces(self, pieces: list[bytes]) -> None:
        try:
            await self._lines.write_line(pieces)
        except (ConnectionError, OSError) as exc:
            await self._wait_for_failure(
                f"{self._label} stopped reading its stdin ({type(exc).__name__})"
            )

    async def _wait_for_failure(self, fallback: str) -> None:
        # The exit watcher usually explains the failure better (status, stderr); give
        # it a moment before settling for the generic message.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._failed.wait(), _EXIT_STATUS_WAIT_S * 2)
        if self._failure is None:
            self._fail(AdapterGone(f"{fallback}.\n{self._stderr.render()}"))

    def _abandon(self, request_id: int) -> None:
        notification = self._conn.cancel(request_id)
        if notification and self._failure is None:
            self._lines.write_message(notification)

    def _dispatch(self, events: Iterable[Event]) -> None:
        for event in events:
            if isinstance(event, Reply):
                future = self._futures.get(event.id)
                if future is None or future.done():
                    continue
                if event.error is not None:
                    future.set_exception(event.error)
                else:
                    future.set_result(event)
            else:
                self._fail(ProtocolBroken(f"{self._label} broke the protocol: {event.error}"))

    def _fail(self, error: AdapterError) -> None:
        if self._failure is not None:
            return
        self._failure = error
        self._failed.set()
        for future in self._futures.values():
            if not future.done():
                future.set_exception(error)
                self._failure_delivered = True

    # -- watching the process -----------------------------------------------

    async def _pump_stdout(self, stream: asyncio.StreamReader) -> None:
        async for data in read_chunks(stream):
            self._dispatch(self._conn.feed(data))
        self._dispatch(self._conn.feed_eof())

    async def _exited(self) -> int:
        # Not proc.wait(): that returns only once stdout and stderr are closed too.
        while self._proc.returncode is None:
            await asyncio.sleep(_EXIT_POLL_S)
        return self._proc.returncode

    async def _stdin_closed(self) -> None:
        with contextlib.suppress(Exception):
            await self._stdin.wait_closed()

    async def _watch(self) -> None:
        """Fail every pending call once the process exits, or closes its stdout or stdin."""
        ended = {self._exit_task, self._stdout_task}
        await asyncio.wait({*ended, self._stdin_task}, return_when=asyncio.FIRST_COMPLETED)
        if not any(task.done() for task in ended):
            # The adapter closed its stdin: a request already in the pipe is lost with it,
            # so waiting for its answer would wait for ever. A dying process closes stdin
            # first too, so give its exit a moment to explain things better.
            await asyncio.wait(ended, timeout=_EXIT_STATUS_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
            if not any(task.done() for task in ended):
                if self._failure is None and not self._closed:
                    self._fail(AdapterError(f"{self._label} stopped reading its stdin.\n{self._stderr.render()}"))
                return
        if self._exit_task.done():
            # Answers written just before exiting may still be in the pipe.
            await asyncio.wait({self._stdout_task, self._stderr_task}, timeout=_DRAIN_AFTER_EXIT_S)
        else:
            await asyncio.wait({self._exit_task}, timeout=_EXIT_STATUS_WAIT_S)
            await asyncio.wait({self._stderr_task}, timeout=_DRAIN_AFTER_EXIT_S)
        if self._failure is not None or self._closed:
            # Once close() has started it judges the exit itself.
            return
        pending = [m for m in self._conn.pending.values() if m != "close"]
        status = describe_returncode(self._proc.returncode)
        if self._proc.returncode is None:
            status = "closed its stdout"
        just_shown = False
        if self._conn.state is State.INITIALIZING:
            when = "before answering initialize"
            just_shown = True
        elif pending:
            count = len(pending)
            when = f"while {count} call{'s were' if count != 1 else ' was'} pending"
        else:
            when = "unexpectedly"
        self._fail(AdapterGone(f"{self._label} {status} {when}.\n{self._stderr.render(just_shown=just_shown)}"))

    # -- shutting down --------------------------------------------------------

    async def _close_gracefully(self) -> list[str]:
        """Send ``close`` and wait up to ``grace_s`` for exit; return what went wrong."""
        problems: list[str] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._spec.grace_s
        alive = self._proc.returncode is None and not self._exit_task.done()
        if alive and not self._stdin.is_closing() and self._conn.state not in (
            State.CLOSING,
            State.CLOSED,
        ):
            close_call = asyncio.ensure_future(self._call("close", b"{}"))
            await asyncio.wait(
                {close_call, self._exit_task},
                timeout=self._spec.grace_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not close_call.done() and self._exit_task.done():
                # The answer may still be in the pipe.
                await asyncio.wait({close_call}, timeout=_DRAIN_AFTER_EXIT_S)
            if not close_call.done():
                close_call.cancel()
                await asyncio.wait({close_call})
                if self._exit_task.done():
                    problems.append(
                        f"it {describe_returncode(self._proc.returncode)} "
                        f"without answering close.\n{self._stderr.render()}"
                    )
                else:
                    problems.append(
                        f"it did not answer close within {self._spec.grace_s:g}s and was "
                        f"terminated.\n{self._stderr.render()}"
                    )
            elif close_call.exception() is not None:
                exc = close_call.exception()
                if exc is not self._failure:
                    problems.append(f"close failed: {exc}")
        if not self._stdin.is_closing():
            # End of input tells adapters that read until EOF to finish.
            with contextlib.suppress(Exception):
                self._stdin.close()
        if not self._exit_task.done():
            remaining = max(0.0, deadline - loop.time())
            await asyncio.wait({self._exit_task}, timeout=remaining)
            if not self._exit_task.done():
                if not problems:
                    problems.append(
                        f"it did not exit within {self._spec.grace_s:g}s of close and was "
                        f"terminated.\n{self._stderr.render()}"
                    )
                return problems
        returncode = self._proc.returncode
        if returncode not in (0, None) and self._conn.state is State.CLOSED:
            problems.append(
                f"it {describe_returncode(returncode)} after close.\n{self._stderr.render()}"
            )
        if self._failure is not None:  # a crash already says what went wrong
            return problems
        # As upstream, which waits for its pipes to close: a helper left holding them fails the run.
        await asyncio.wait({self._stdout_task, self._stderr_task}, timeout=_DRAIN_AFTER_EXIT_S)
        ends = [self._proc._transport.get_pipe_transport(n) for n, task in  # type: ignore[attr-defined]
                ((1, self._stdout_task), (2, self._stderr_task)) if not task.done()]
        holders = pipe_holders([end.get_extra_info("pipe").fileno() for end in ends if end is not None])
        if holders:
            problems.append(f"it exited but left {len(holders)} process{'es' if len(holders) != 1 else ''} "
                            f"holding its stdout or stderr: {', '.join(holders)}; they were terminated "
                            "(end the adapter's helpers when it closes, or close their copies of its output)")
        return problems

    async def _stop_tasks(self) -> None:
        self._closed = True
        if not self._stdin.is_closing():
            with contextlib.suppress(Exception):
                self._stdin.close()
        # Once the group is gone the pipes reach EOF; a wedged pipe is not waited on.
        tasks = {self._stdout_task, self._stderr_task, self._exit_task, self._stdin_task, self._watch_task}
        _, pending = await asyncio.wait(tasks, timeout=_KILL_WAIT_S)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        # Normally the transport closes itself once the process has exited and both
        # output pipes reached EOF; a pipe still held open by an escaped descendant
        # must not leave it open (and leaking file descriptors).
        transport = getattr(self._proc, "_transport", None)
        if transport is not None:
            transport.close()
        self._fail_leftovers()

    def _fail_leftovers(self) -> None:
        error = AdapterError(f"{self._label} was closed")
        for future in self._futures.values():
            if not future.done():
                future.set_exception(error)
