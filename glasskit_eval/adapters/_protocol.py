"""Command adapter protocol version 1, as bytes in and bytes out: no processes, no I/O.

The runner and a command adapter exchange newline-delimited JSON over the adapter's
stdin and stdout. We send requests ``{"id", "method", "params"}`` (``initialize``,
``evaluate``, ``evaluateMany``, the stream requests ``startStream``, ``frame`` and
``endStream``, and ``close``) and the notification ``{"method": "cancel",
"params": {"id"}}``; the adapter answers each request once with ``{"id", "result"}``
or ``{"id", "error": {"message", "stack"?}}``.

:class:`Connection` holds all of the protocol's state (the lifecycle, request ids,
pending and abandoned calls) and does no I/O: :meth:`Connection.request` returns the
bytes to write, :meth:`Connection.feed` takes bytes read and returns events. The
subprocess side lives in ``process.py``.

Errors are split by blame. :class:`~glasskit_eval.errors.ProtocolError` means the
adapter broke the protocol; it only ever comes out of :meth:`Connection.feed`, the one
place adapter output enters, and always as an event rather than raised, so the caller
decides which calls fail. :class:`LocalProtocolError` means this package misused the
connection (a bug here, never the user's fault). An outgoing message over the size
limit is neither: it is an :class:`~glasskit_eval.errors.AdapterError` the user can fix.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from ..errors import AdapterError, ProtocolError
from ._handshake import PROTOCOL_VERSION, Capabilities, parse_initialize_result
from ._messages import (
    NonFinite,
    encode_params,
    format_size,
    is_number,
    oversized_request_error,
    parse_float,
    preview,
    reject_constant,
    usage_problem,
)

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "STREAM_METHODS",
    "Capabilities",
    "Connection",
    "Event",
    "LocalProtocolError",
    "Reply",
    "State",
    "Violation",
    "encode_params",
    "format_size",
    "oversized_request_error",
    "parse_initialize_result",
]

#: A stream's requests; the adapter reports them with the ``frame`` capability.
STREAM_METHODS: Final = ("startStream", "frame", "endStream")

#: Largest message, in bytes without its newline, accepted in each direction. It is
#: what bounds how many PNG frames one ``evaluateMany`` request can carry.
MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024

_LOG_HINT = (
    "stdout is reserved for protocol messages: write logs to stderr instead "
    "(console.error() in Node, print(..., file=sys.stderr) in Python)"
)


class LocalProtocolError(RuntimeError):
    """This package used the connection in a way protocol v1 forbids (a bug here)."""


class State(enum.Enum):
    """Where the conversation with one adapter process stands."""

    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    INIT_FAILED = "init-failed"
    CLOSING = "closing"
    CLOSED = "closed"


# The lifecycle as data. Methods we may send in each state; ``evaluate`` and
# ``evaluateMany`` additionally need the capability the adapter reported.
_SENDABLE: Final[Mapping[State, frozenset[str]]] = {
    State.UNINITIALIZED: frozenset({"initialize", "close"}),
    State.INITIALIZING: frozenset({"close"}),
    State.READY: frozenset({"evaluate", "evaluateMany", *STREAM_METHODS, "close"}),
    State.INIT_FAILED: frozenset({"close"}),
    State.CLOSING: frozenset(),
    State.CLOSED: frozenset(),
}
# Sending a request moves the state...
_ON_SEND: Final[Mapping[str, State]] = {
    "initialize": State.INITIALIZING,
    "close": State.CLOSING,
}
# ...and so does its reply: (state, method, answered without error) -> next state.
# An initialize answer arriving after we sent close leaves us closing.
_ON_REPLY: Final[Mapping[tuple[State, str, bool], State]] = {
    (State.INITIALIZING, "initialize", True): State.READY,
    (State.INITIALIZING, "initialize", False): State.INIT_FAILED,
    (State.CLOSING, "close", True): State.CLOSED,
    (State.CLOSING, "close", False): State.CLOSED,
}


@dataclass(frozen=True)
class Reply:
    """The adapter's answer to one request: ``result``, or ``error`` when it failed.

    ``error`` is an :class:`AdapterError` carrying the adapter's own message when it
    answered with an error, or a :class:`ProtocolError` when its answer broke the
    protocol in a way that concerns only this request (say, NaN in a result).
    """

    id: int
    method: str
    result: Any = None
    error: AdapterError | None = None
    #: The optional ``usage`` beside ``result``: an object of numbers (for ``evaluateMany``
    #: also a list with one object or null per sample).
    usage: Any = None



@dataclass(frozen=True)
class Violation:
    """Output that breaks the protocol and cannot be pinned on one request.

    After a violation nobody can tell which answer went missing, so callers should
    fail every pending call with :attr:`error`.
    """

    error: ProtocolError


Event: TypeAlias = Reply | Violation


@dataclass
class _Pending:
    method: str
    expected_results: int | None


class Connection:
    """Our side of one conversation with a command adapter.

    Args:
        max_incoming_bytes: longest line the adapter may send, without its newline.
        max_outgoing_bytes: longest request we agree to send, without its newline.
    """

    def __init__(
        self,
        *,
        max_incoming_bytes: int = MAX_MESSAGE_BYTES,
        max_outgoing_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        if max_incoming_bytes < 1 or max_outgoing_bytes < 1:
            raise ValueError("message size limits must be positive")
        self.max_incoming_bytes = max_incoming_bytes
        self.max_outgoing_bytes = max_outgoing_bytes
        self.state = State.UNINITIALIZED
        self.capabilities: Capabilities | None = None
        #: The first violation seen, if any; the connection keeps working after it.
        self.violation: ProtocolError | None = None
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._abandoned: dict[int, str] = {}
        self._buffer = bytearray()
        # Where to resume looking for a newline, so a long line arriving in many
        # chunks is scanned once rather than once per chunk.
        self._scan_from = 0
        # True while dropping the rest of a line that already broke the size limit.
        self._discarding = False

    @property
    def pending(self) -> Mapping[int, str]:
        """Requests sent and not yet answered nor abandoned: id -> method."""
        return {rid: p.method for rid, p in self._pending.items()}

    # -- outgoing -----------------------------------------------------------

    def request(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        expected_results: int | None = None,
    ) -> tuple[int, bytes]:
        """Start a request; return its id and the line to write (newline included)."""
        return self.request_encoded(
            method, encode_params(params), expected_results=expected_results
        )

    def request_encoded(
        self,
        method: str,
        params_json: bytes | Sequence[bytes],
        *,
        expected_results: int | None = None,
    ) -> tuple[int, bytes]:
        """Like :meth:`request`, with params already serialized by :func:`encode_params`.

        This lets the caller build the expensive part (base64 frames) off the event
        loop; pieces are joined once. ``expected_results`` is the batch size of an ``evaluateMany`` request, whose
        result must be a list of exactly that length.

        Raises ``LocalProtocolError`` when ``method`` may not be sent now, ``AdapterError``
        when the message would exceed ``max_outgoing_bytes``.
        """
        request_id, pieces = self.request_pieces(method, params_json, expected_results=expected_results)
        return request_id, b"".join(pieces)

    def request_pieces(
        self,
        method: str,
        params_json: bytes | Sequence[bytes],
        *,
        expected_results: int | None = None,
    ) -> tuple[int, list[bytes]]:
        """:meth:`request_encoded`, with the line as pieces, never joined (``_linewriter``)."""
        self._check_sendable(method)
        if (method == "evaluateMany") != (expected_results is not None):
            raise LocalProtocolError("expected_results is required for evaluateMany only")
        request_id = self._next_id
        head = b'{"id":%d,"method":%s,"params":' % (request_id, json.dumps(method).encode())
        parts = [params_json] if isinstance(params_json, bytes) else params_json
        size = len(head) + sum(len(part) for part in parts) + 1
        if size > self.max_outgoing_bytes:
            raise oversized_request_error(method, size, self.max_outgoing_bytes, expected_results)
        self._next_id += 1
        self._pending[request_id] = _Pending(method, expected_results)
        if method in _ON_SEND:
            self.state = _ON_SEND[method]
        return request_id, [head, *parts, b"}\n"]

    def cancel(self, request_id: int) -> bytes:
        """Abandon a pending request; return the ``cancel`` notification to write.

        A late answer to an abandoned request is dropped silently. Returns ``b""``
        when the request is no longer pending (already answered or abandoned).
        """
        pending = self._pending.pop(request_id, None)
        if pending is None:
            return b""
        self._abandoned[request_id] = pending.method
        return b'{"method":"cancel","params":{"id":%d}}\n' % request_id

    def _check_sendable(self, method: str) -> None:
        if method not in _SENDABLE[self.state]:
            raise LocalProtocolError(f"cannot send {method!r} in state {self.state.value}")
        caps = self.capabilities
        if method == "evaluate" and not (caps and caps.evaluate):
            raise LocalProtocolError("the adapter did not report the evaluate capability")
        if method == "evaluateMany" and not (caps and caps.evaluate_many):
            raise LocalProtocolError("the adapter did not report the evaluateMany capability")
        if method in STREAM_METHODS and not (caps and caps.frame):
            raise LocalProtocolError("the adapter did not report the frame capability")

    # -- incoming -----------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        """Take bytes read from the adapter's stdout; return the events they complete."""
        events: list[Event] = []
        buffer = self._buffer
        buffer += data
        while buffer:
            newline = buffer.find(b"\n", self._scan_from)
            if newline < 0:
                if self._discarding:
                    buffer.clear()
                    self._scan_from = 0
                elif len(buffer) > self.max_incoming_bytes:
                    buffer.clear()
                    self._scan_from = 0
                    self._discarding = True
                    events.append(self._violate(self._too_long_message()))
                else:
                    self._scan_from = len(buffer)
                break
            # Cut the line out before parsing it, so a bad line is one error event
            # and the lines after it still flow.
            line = bytes(buffer[:newline])
            del buffer[: newline + 1]
            self._scan_from = 0
            if self._discarding:
                self._discarding = False
                continue
            if len(line) > self.max_incoming_bytes:
                events.append(self._violate(self._too_long_message()))
                continue
            event = self._handle_line(line)
            if event is not None:
                events.append(event)
        return events

    def feed_eof(self) -> list[Event]:
        """The adapter closed stdout: handle a final line that lacks its newline."""
        if self._discarding or not self._buffer:
            self._buffer.clear()
            self._discarding = False
            return []
        return self.feed(b"\n")

    def _too_long_message(self) -> str:
        return (
            f"the adapter wrote a line longer than the {format_size(self.max_incoming_bytes)} "
            "protocol message limit to stdout; return smaller results (for evaluateMany, "
            "fewer samples per batch), and keep bulk output such as images out of results"
        )

    def _violate(self, message: str) -> Violation:
        error = ProtocolError(message)
        if self.violation is None:
            self.violation = error
        return Violation(error)

    def _handle_line(self, line: bytes) -> Event | None:
        if not line.strip():
            # An empty print() is noise, not a message that could go missing.
            return None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return self._violate(
                f"the adapter wrote bytes that are not UTF-8 to stdout: {preview(line)}; "
                f"{_LOG_HINT}"
            )
        non_finite: str | None = None
        try:
            try:
                message = json.loads(
                    text, parse_constant=reject_constant, parse_float=parse_float
                )
            except NonFinite as exc:
                non_finite = exc.text
                # Parse again, leniently, only to find out which request it answers.
                message = json.loads(text)
        except (ValueError, RecursionError) as exc:
            stripped = text.lstrip()
            if stripped[:1] in ("{", "["):
                return self._violate(
                    f"the adapter wrote invalid JSON to stdout ({exc}): {preview(line)}"
                )
            return self._violate(
                f"the adapter wrote text that is not a protocol message to stdout: "
                f"{preview(line)}; {_LOG_HINT}"
            )
        if not isinstance(message, dict):
            return self._violate(
                "the adapter wrote a JSON value that is not a protocol message object to "
                f"stdout: {preview(line)}; each line must be one JSON object; {_LOG_HINT}"
            )
        return self._handle_message(message, non_finite)

    def _handle_message(self, message: dict[str, Any], non_finite: str | None) -> Event | None:
        if "method" in message:
            return self._violate(
                f"the adapter sent a {message.get('method')!r} message; in protocol version "
                f"{PROTOCOL_VERSION} adapters only answer requests ({{\"id\", \"result\"}} "
                'or {"id", "error"})'
            )
        request_id = message.get("id")
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            return self._violate(
                f"the adapter sent a response without an integer id (id: {request_id!r}); "
                "answer each request with its own id"
            )
        pending = self._pending.pop(request_id, None)
        if pending is None:
            if self._abandoned.pop(request_id, None) is not None:
                return None
            if 0 < request_id < self._next_id:
                return self._violate(f"the adapter answered request {request_id} twice")
            return self._violate(
                f"the adapter answered request id {request_id}, which was never sent"
            )
        reply = self._check_reply(request_id, pending, message, non_finite)
        next_state = _ON_REPLY.get((self.state, pending.method, reply.error is None))
        if next_state is not None:
            self.state = next_state
        return reply

    def _check_reply(
        self,
        request_id: int,
        pending: _Pending,
        message: dict[str, Any],
        non_finite: str | None,
    ) -> Reply:
        method = pending.method

        def broken(problem: str) -> Reply:
            return Reply(request_id, method, error=ProtocolError(problem))

        if non_finite is not None:
            return broken(
                f"the adapter's answer to {method} contains {non_finite}, which is not JSON; "
                "return finite numbers only (use null or a string for a missing value)"
            )
        has_result = "result" in message
        has_error = "error" in message
        if has_result == has_error:
            return broken(
                f"the adapter's answer to {method} must contain exactly one of "
                '"result" or "error"'
            )
        if has_error:
            payload = message["error"]
            if not isinstance(payload, dict) or not isinstance(payload.get("message"), str):
                return broken(
                    f"the adapter's error answer to {method} lacks a string error.message"
                )
            stack = payload.get("stack")
            stack = stack if isinstance(stack, str) else None
            transient = payload.get("transient", False)
            retry_after = payload.get("retryAfterS")
            if not isinstance(transient, bool):
                return broken(f"error.transient in the adapter's answer to {method} must be true or false")
            if retry_after is not None and (not is_number(retry_after) or retry_after < 0):
                return broken(f"error.retryAfterS in the adapter's answer to {method} must be a "
                              "non-negative number of seconds")
            error = AdapterError(payload["message"], stack=stack)
            # `retryAfterS` alone marks the failure transient too.
            error.transient = transient or retry_after is not None
            error.retry_after = retry_after
            return Reply(
                request_id,
                method,
                error=error,
            )
        usage = message.get("usage")
        if usage is not None:
            problem = usage_problem(usage, pending.expected_results)
            if problem is not None:
                return broken(f"the adapter's usage beside its answer to {method} {problem}")
        result = message["result"]
        if method == "initialize":
            try:
                self.capabilities = parse_initialize_result(result)
            except ProtocolError as exc:
                return Reply(request_id, method, error=exc)
        elif pending.expected_results is not None and (
            not isinstance(result, list) or len(result) != pending.expected_results
        ):
            got = (
                f"{len(result)} results" if isinstance(result, list) else type(result).__name__
            )
            return broken(
                f"evaluateMany must return a list with exactly one observation per sample in "
                f"order: sent {pending.expected_results} samples, got {got}"
            )
        return Reply(request_id, method, result=result, usage=usage)
