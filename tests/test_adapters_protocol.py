"""The sans-IO protocol: bytes in, events out; requests in, bytes out. No processes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from glasskit_eval.adapters._protocol import (
    MAX_MESSAGE_BYTES,
    Capabilities,
    Connection,
    Event,
    LocalProtocolError,
    Reply,
    State,
    Violation,
    encode_params,
    format_size,
    parse_initialize_result,
)
from glasskit_eval.errors import AdapterError, ProtocolError

INIT_OK = {"protocolVersion": 1, "capabilities": {"evaluate": True, "evaluateMany": True}}


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def ready(**limits: int) -> Connection:
    """A connection past initialize, with both capabilities."""
    conn = Connection()
    request_id, _ = conn.request("initialize", {"protocolVersion": 1, "config": {}})
    [reply] = conn.feed(line({"id": request_id, "result": INIT_OK}))
    assert isinstance(reply, Reply) and reply.error is None
    # Small limits apply from here on, so the handshake itself fits.
    for name, value in limits.items():
        setattr(conn, name, value)
    return conn


def only(events: list[Event]) -> Event:
    assert len(events) == 1, events
    return events[0]


def violation(events: list[Event]) -> str:
    event = only(events)
    assert isinstance(event, Violation), event
    assert isinstance(event.error, ProtocolError)
    return str(event.error)


def reply_error(events: list[Event]) -> AdapterError:
    event = only(events)
    assert isinstance(event, Reply), event
    assert event.error is not None, event
    return event.error


# -- outgoing ---------------------------------------------------------------------


def test_requests_are_one_json_object_per_line_with_increasing_ids() -> None:
    conn = Connection()
    first_id, first = conn.request("initialize", {"protocolVersion": 1, "config": {"a": [1, 2]}})
    assert first.endswith(b"\n") and first.count(b"\n") == 1
    assert json.loads(first) == {
        "id": first_id,
        "method": "initialize",
        "params": {"protocolVersion": 1, "config": {"a": [1, 2]}},
    }
    conn.feed(line({"id": first_id, "result": INIT_OK}))
    second_id, second = conn.request("evaluate", {"sample": {}, "target": {}})
    assert second_id == first_id + 1
    assert json.loads(second)["method"] == "evaluate"
    assert conn.pending == {second_id: "evaluate"}


def test_request_text_is_ascii_even_for_unicode_and_newlines_in_values() -> None:
    conn = Connection()
    _, data = conn.request("initialize", {"config": {"name": "café\nline", "emoji": "🎥"}})
    assert data.isascii() and data.count(b"\n") == 1
    assert json.loads(data)["params"]["config"] == {"name": "café\nline", "emoji": "🎥"}


def test_request_encoded_splices_pre_serialized_params() -> None:
    conn = ready()
    request_id, data = conn.request_encoded(
        "evaluateMany", b'{"samples":[],"target":{}}', expected_results=0
    )
    assert json.loads(data) == {
        "id": request_id,
        "method": "evaluateMany",
        "params": {"samples": [], "target": {}},
    }


def test_params_that_are_not_json_are_refused_before_sending() -> None:
    conn = Connection()
    with pytest.raises(AdapterError, match="as JSON"):
        conn.request("initialize", {"config": {"x": float("nan")}})
    with pytest.raises(AdapterError, match="as JSON"):
        encode_params({"x": object()})
    assert conn.state is State.UNINITIALIZED and not conn.pending


@pytest.mark.parametrize(
    ("method", "kwargs"),
    [("evaluate", {}), ("evaluateMany", {"expected_results": 1}), ("initialize", {})],
)
def test_lifecycle_forbids_calls_out_of_order(method: str, kwargs: dict[str, int]) -> None:
    conn = Connection()
    conn.request("initialize", {})
    # While initializing, only close may be sent.
    with pytest.raises(LocalProtocolError):
        conn.request(method, {}, **kwargs)


def test_evaluate_needs_the_reported_capability() -> None:
    conn = Connection()
    request_id, _ = conn.request("initialize", {})
    caps = {"protocolVersion": 1, "capabilities": {"evaluate": False, "evaluateMany": True}}
    conn.feed(line({"id": request_id, "result": caps}))
    assert conn.capabilities == Capabilities(evaluate=False, evaluate_many=True)
    with pytest.raises(LocalProtocolError, match="evaluate capability"):
        conn.request("evaluate", {})
    conn.request("evaluateMany", {}, expected_results=2)
    with pytest.raises(LocalProtocolError, match="expected_results"):
        conn.request("evaluateMany", {})


def test_stream_requests_need_the_frame_capability_and_answer_emissions_as_sent() -> None:
    conn = Connection()
    request_id, _ = conn.request("initialize", {})
    conn.feed(line({"id": request_id, "result": {"protocolVersion": 1, "capabilities": {"frame": True}}}))
    assert conn.capabilities == Capabilities(evaluate=False, evaluate_many=False, frame=True)
    with pytest.raises(LocalProtocolError, match="evaluate capability"):
        conn.request("evaluate", {})
    answers = {}
    for method, result in (("startStream", None), ("frame", [{"a": 1}, 2]), ("frame", None), ("endStream", "x")):
        sent, data = conn.request(method, {"stream": {"id": "1"}})
        assert json.loads(data)["method"] == method
        answers[sent] = only(conn.feed(line({"id": sent, "result": result})))
    assert [(r.method, r.result) for r in answers.values()] == [  # type: ignore[union-attr]
        ("startStream", None), ("frame", [{"a": 1}, 2]), ("frame", None), ("endStream", "x")]
    # NaN in a frame's answer concerns that request only.
    sent, _ = conn.request("frame", {})
    error = reply_error(conn.feed(f'{{"id": {sent}, "result": {{"a": NaN}}}}\n'.encode()))
    assert isinstance(error, ProtocolError) and "the adapter's answer to frame contains NaN" in str(error)


def test_stream_requests_without_the_frame_capability_are_refused() -> None:
    conn = ready()
    for method in ("startStream", "frame", "endStream"):
        with pytest.raises(LocalProtocolError, match="frame capability"):
            conn.request(method, {})


def test_close_moves_to_closing_then_closed() -> None:
    conn = ready()
    close_id, data = conn.request("close", {})
    assert json.loads(data)["params"] == {}
    assert conn.state is State.CLOSING
    with pytest.raises(LocalProtocolError):
        conn.request("evaluate", {})
    with pytest.raises(LocalProtocolError):
        conn.request("close", {})
    reply = only(conn.feed(line({"id": close_id, "result": None})))
    assert isinstance(reply, Reply) and reply.method == "close"
    assert conn.state is State.CLOSED


def test_close_may_be_sent_while_initializing_and_wins() -> None:
    conn = Connection()
    init_id, _ = conn.request("initialize", {})
    conn.request("close", {})
    conn.feed(line({"id": init_id, "result": INIT_OK}))
    assert conn.state is State.CLOSING


def test_oversized_evaluate_many_request_tells_the_user_what_to_do() -> None:
    conn = ready(max_outgoing_bytes=100)
    with pytest.raises(AdapterError) as info:
        conn.request_encoded("evaluateMany", b"x" * 200, expected_results=7)
    message = str(info.value)
    assert "7 samples" in message and "100 bytes" in message
    assert "Lower the batch" in message and "implement evaluate" in message
    assert not isinstance(info.value, LocalProtocolError)
    # Nothing was sent, so no id was used up.
    assert not conn.pending
    next_id, _ = conn.request("evaluate", {})
    assert next_id == 2


def test_message_at_the_outgoing_limit_is_allowed() -> None:
    conn = ready(max_outgoing_bytes=60)
    head = b'{"id":2,"method":"evaluate","params":'
    params = b'"' + b"x" * (60 - len(head) - 3) + b'"'
    _, data = conn.request_encoded("evaluate", params)
    assert len(data) == 61  # the limit, plus the newline
    with pytest.raises(AdapterError):
        conn.request_encoded("evaluate", params + b" ")


def test_default_limit_is_256_mib() -> None:
    assert MAX_MESSAGE_BYTES == 256 * 1024 * 1024
    assert format_size(MAX_MESSAGE_BYTES) == "256 MiB"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(100) == "100 bytes"


# -- incoming: framing ----------------------------------------------------------------


def test_messages_split_across_chunks_byte_by_byte() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    data = line({"id": request_id, "result": {"ok": True, "text": "a\nb"}})
    events: list[Event] = []
    for i in range(len(data)):
        events += conn.feed(data[i : i + 1])
    assert events == [Reply(request_id, "evaluate", result={"ok": True, "text": "a\nb"})]


def test_several_messages_in_one_chunk_and_crlf_and_blank_lines() -> None:
    conn = ready()
    ids = [conn.request("evaluate", {})[0] for _ in range(3)]
    data = (
        line({"id": ids[2], "result": 3})
        + b"\n   \n"
        + json.dumps({"id": ids[0], "result": 1}).encode()
        + b"\r\n"
        + line({"id": ids[1], "result": 2})
    )
    events = conn.feed(data)
    assert [(e.id, e.result) for e in events if isinstance(e, Reply)] == [(ids[2], 3), (ids[0], 1), (ids[1], 2)]
    assert not conn.pending


def test_one_bad_line_is_one_error_and_later_lines_still_flow() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    events = conn.feed(b'{"id": 2, "result": tru\n' + line({"id": request_id, "result": True}))
    assert len(events) == 2
    assert isinstance(events[0], Violation) and "invalid JSON" in str(events[0].error)
    assert events[1] == Reply(request_id, "evaluate", result=True)
    assert conn.violation is events[0].error


def test_final_line_without_newline_is_read_at_eof() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    assert conn.feed(json.dumps({"id": request_id, "result": 5}).encode()) == []
    assert conn.feed_eof() == [Reply(request_id, "evaluate", result=5)]
    assert conn.feed_eof() == []


# -- incoming: size limit -----------------------------------------------------------


def test_line_over_the_limit_is_one_violation_and_is_skipped_whole() -> None:
    conn = ready(max_incoming_bytes=64)
    request_id, _ = conn.request("evaluate", {})
    events: list[Event] = []
    # The long line arrives in pieces; memory must not grow past the limit.
    events += conn.feed(b'{"id": 2, "result": "' + b"x" * 50)
    events += conn.feed(b"x" * 50)
    events += conn.feed(b"x" * 50 + b'"}\n' + line({"id": request_id, "result": 1}))
    assert len(events) == 2
    message = str(events[0].error) if isinstance(events[0], Violation) else ""
    assert "longer than the 64 bytes protocol message limit" in message
    assert events[1] == Reply(request_id, "evaluate", result=1)


def test_line_over_the_limit_in_a_single_chunk() -> None:
    conn = ready(max_incoming_bytes=32)
    text = violation(conn.feed(b"y" * 33 + b"\n"))
    assert "limit" in text


def test_line_exactly_at_the_limit_is_accepted() -> None:
    conn = ready(max_incoming_bytes=40)
    request_id, _ = conn.request("evaluate", {})
    empty = json.dumps({"id": request_id, "result": ""}).encode()
    fill = 40 - len(empty)
    body = empty[:-2] + b"z" * fill + b'"}'
    assert len(body) == 40
    events = conn.feed(body[:20])
    events += conn.feed(body[20:] + b"\n")
    assert events == [Reply(request_id, "evaluate", result="z" * fill)]


# -- incoming: violations -----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [b"Loading model weights...", b"INFO 12:00:01 ready", b"warning: deprecated"],
)
def test_log_text_on_stdout_says_to_log_to_stderr(text: bytes) -> None:
    message = violation(ready().feed(text + b"\n"))
    assert "not a protocol message" in message
    assert repr(text.decode()) in message
    assert "stderr" in message and "console.error" in message


@pytest.mark.parametrize("text", [b"42", b'"hello"', b"[1, 2]", b"true", b"null"])
def test_json_that_is_not_an_object_is_a_violation(text: bytes) -> None:
    message = violation(ready().feed(text + b"\n"))
    assert "not a protocol message object" in message and "stderr" in message


def test_invalid_utf8_is_a_violation() -> None:
    assert "not UTF-8" in violation(ready().feed(b'{"id": 2, "result": "\xff"}\n'))


def test_long_garbage_is_shown_truncated() -> None:
    message = violation(ready().feed(b"z" * 10_000 + b"\n"))
    assert len(message) < 500 and "…" in message


def test_unknown_id_is_a_violation() -> None:
    conn = ready()
    conn.request("evaluate", {})
    assert "never sent" in violation(conn.feed(line({"id": 99, "result": True})))
    assert "never sent" in violation(conn.feed(line({"id": 0, "result": True})))


def test_duplicate_answer_is_a_violation() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    conn.feed(line({"id": request_id, "result": True}))
    assert f"answered request {request_id} twice" in violation(
        conn.feed(line({"id": request_id, "result": False}))
    )


@pytest.mark.parametrize("bad_id", ["2", True, None, 2.0, [2]])
def test_answer_without_an_integer_id_is_a_violation(bad_id: Any) -> None:
    conn = ready()
    conn.request("evaluate", {})
    assert "integer id" in violation(conn.feed(line({"id": bad_id, "result": True})))


def test_answer_without_any_id_is_a_violation() -> None:
    assert "integer id" in violation(ready().feed(line({"result": True})))


def test_adapter_sending_requests_is_a_violation() -> None:
    message = violation(ready().feed(line({"id": 1, "method": "log", "params": {}})))
    assert "'log'" in message and "only answer requests" in message


def test_deeply_nested_garbage_does_not_crash() -> None:
    conn = ready()
    text = violation(conn.feed(b"[" * 100_000 + b"\n"))
    assert "invalid JSON" in text


# -- incoming: replies ----------------------------------------------------------------


def test_error_answer_carries_the_adapter_message_and_stack() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    [event] = conn.feed(
        line({"id": request_id, "error": {"message": "quota exceeded", "stack": "Error\n at x"}})
    )
    assert isinstance(event, Reply)
    assert type(event.error) is AdapterError and str(event.error) == "quota exceeded"
    assert event.error is not None and event.error.stack == "Error\n at x"
    assert event.error.transient is False
    assert not conn.pending


def test_transient_error_answers_carry_transient_and_retry_after() -> None:
    conn = ready()
    first, _ = conn.request("evaluate", {})
    second, _ = conn.request("evaluate", {})
    events = conn.feed(line({"id": first, "error": {"message": "503", "transient": True}})
                       + line({"id": second, "error": {"message": "429", "retryAfterS": 2.5}}))
    errors = [e.error for e in events if isinstance(e, Reply)]
    assert [(getattr(e, "transient", None), getattr(e, "retry_after", None)) for e in errors] == [
        (True, None), (True, 2.5)]


@pytest.mark.parametrize("payload", [{"message": "x", "transient": "yes"}, {"message": "x", "retryAfterS": -1},
                                     {"message": "x", "retryAfterS": "soon"}])
def test_malformed_transient_fields_are_protocol_errors(payload: Any) -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    error = reply_error(conn.feed(line({"id": request_id, "error": payload})))
    assert isinstance(error, ProtocolError)


def test_usage_beside_a_result_is_returned_and_checked() -> None:
    conn = ready()
    good, _ = conn.request("evaluate", {})
    bad, _ = conn.request("evaluate", {})
    events = conn.feed(line({"id": good, "result": 1, "usage": {"input_tokens": 5, "cost": 0.1}})
                       + line({"id": bad, "result": 1, "usage": {"cost": "free"}}))
    replies = [e for e in events if isinstance(e, Reply)]
    assert replies[0].usage == {"input_tokens": 5, "cost": 0.1} and replies[0].error is None
    assert isinstance(replies[1].error, ProtocolError) and "'cost'" in str(replies[1].error)


@pytest.mark.parametrize(
    "payload", [{"message": 5}, "boom", {"stack": "x"}, None]
)
def test_malformed_error_answer_is_a_protocol_error_for_that_call(payload: Any) -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    error = reply_error(conn.feed(line({"id": request_id, "error": payload})))
    assert isinstance(error, ProtocolError) and "error.message" in str(error)
    assert conn.violation is None


@pytest.mark.parametrize(
    "message", [{"result": 1, "error": {"message": "x"}}, {}]
)
def test_answer_needs_exactly_one_of_result_and_error(message: dict[str, Any]) -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    error = reply_error(conn.feed(line({"id": request_id, **message})))
    assert isinstance(error, ProtocolError) and "exactly one" in str(error)


def test_null_result_is_a_result() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    assert conn.feed(line({"id": request_id, "result": None})) == [
        Reply(request_id, "evaluate", result=None)
    ]


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        (b'{"score": NaN}', "NaN"),
        (b"[1, Infinity]", "Infinity"),
        (b"-Infinity", "-Infinity"),
        (b'{"big": 1e999}', "1e999"),
        (b'{"neg": -1E400}', "-1E400"),
    ],
)
def test_non_finite_numbers_are_refused_for_that_call_only(raw: bytes, name: str) -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    other_id, _ = conn.request("evaluate", {})
    events = conn.feed(b'{"id": %d, "result": %s}\n' % (request_id, raw))
    error = reply_error(events)
    assert isinstance(error, ProtocolError)
    assert name in str(error) and "not JSON" in str(error)
    # The connection is fine: the other call still gets its answer.
    assert conn.violation is None
    assert conn.feed(line({"id": other_id, "result": 1.5e300})) == [
        Reply(other_id, "evaluate", result=1.5e300)
    ]


def test_non_finite_number_in_an_answer_with_unknown_id_is_a_violation() -> None:
    conn = ready()
    assert "never sent" in violation(conn.feed(b'{"id": 50, "result": NaN}\n'))


def test_evaluate_many_must_answer_one_observation_per_sample() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluateMany", {}, expected_results=3)
    error = reply_error(conn.feed(line({"id": request_id, "result": [1, 2]})))
    assert isinstance(error, ProtocolError)
    assert "sent 3 samples, got 2 results" in str(error)
    request_id, _ = conn.request("evaluateMany", {}, expected_results=1)
    error = reply_error(conn.feed(line({"id": request_id, "result": {"0": 1}})))
    assert "got dict" in str(error)
    request_id, _ = conn.request("evaluateMany", {}, expected_results=2)
    assert conn.feed(line({"id": request_id, "result": [None, {"a": 1}]})) == [
        Reply(request_id, "evaluateMany", result=[None, {"a": 1}])
    ]


# -- cancel -----------------------------------------------------------------------------


def test_cancel_builds_a_notification_and_drops_the_late_answer() -> None:
    conn = ready()
    request_id, _ = conn.request("evaluate", {})
    data = conn.cancel(request_id)
    assert json.loads(data) == {"method": "cancel", "params": {"id": request_id}}
    assert "id" not in json.loads(data)
    assert not conn.pending
    # The adapter may still answer (with a result or an abort error): silently dropped.
    assert conn.feed(line({"id": request_id, "error": {"message": "aborted"}})) == []
    # ...but only once.
    assert "twice" in violation(conn.feed(line({"id": request_id, "result": 1})))


def test_cancel_of_an_unknown_or_finished_call_sends_nothing() -> None:
    conn = ready()
    assert conn.cancel(123) == b""
    request_id, _ = conn.request("evaluate", {})
    conn.feed(line({"id": request_id, "result": 1}))
    assert conn.cancel(request_id) == b""


# -- initialize -------------------------------------------------------------------------


def test_initialize_error_answer_moves_to_init_failed() -> None:
    conn = Connection()
    request_id, _ = conn.request("initialize", {})
    error = reply_error(conn.feed(line({"id": request_id, "error": {"message": "no API key"}})))
    assert str(error) == "no API key"
    assert conn.state is State.INIT_FAILED
    conn.request("close", {})


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"protocolVersion": 2, "capabilities": {"evaluate": True}}, "protocol version 2"),
        ({"capabilities": {"evaluate": True}}, "protocol version None"),
        ({"protocolVersion": True, "capabilities": {"evaluate": True}}, "protocol version True"),
        ({"protocolVersion": 1, "capabilities": {}}, "none of the evaluate, evaluateMany and frame"),
        ({"protocolVersion": 1, "capabilities": {"evaluate": False, "evaluateMany": False}}, "none of"),
        ({"protocolVersion": 1, "capabilities": {"frame": 1}}, "capabilities.frame"),
        ({"protocolVersion": 1}, "capabilities object"),
        ({"protocolVersion": 1, "capabilities": {"evaluate": "yes"}}, "true or false"),
        ([1], "must be an object"),
        (None, "must be an object"),
    ],
)
def test_bad_initialize_results_are_refused(result: Any, expected: str) -> None:
    conn = Connection()
    request_id, _ = conn.request("initialize", {})
    error = reply_error(conn.feed(line({"id": request_id, "result": result})))
    assert isinstance(error, ProtocolError) and expected in str(error)
    assert conn.state is State.INIT_FAILED
    assert conn.capabilities is None


def test_protocol_version_message_names_both_versions() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_initialize_result({"protocolVersion": 2, "capabilities": {"evaluate": True}})
    assert "version 2" in str(info.value) and "version 1" in str(info.value)


def test_only_evaluate_many_is_fine() -> None:
    assert parse_initialize_result(
        {"protocolVersion": 1, "capabilities": {"evaluateMany": True}}
    ) == Capabilities(evaluate=False, evaluate_many=True)


# -- a whole conversation -------------------------------------------------------------


def fake_adapter(data: bytes) -> bytes:
    """A well-behaved adapter: answers every request line it is given, in reverse order."""
    answers = []
    for raw in data.splitlines():
        request = json.loads(raw)
        if "id" not in request:
            continue
        method = request["method"]
        if method == "initialize":
            result: Any = INIT_OK
        elif method == "evaluate":
            result = {"echo": request["params"]["sample"]["n"]}
        elif method == "evaluateMany":
            result = [{"echo": s["n"]} for s in request["params"]["samples"]]
        else:
            result = None
        answers.append(line({"id": request["id"], "result": result}))
    return b"".join(reversed(answers))


def test_full_conversation_with_a_fake_adapter() -> None:
    conn = Connection()
    _, data = conn.request("initialize", {"protocolVersion": 1, "config": {}})
    [init] = conn.feed(fake_adapter(data))
    assert isinstance(init, Reply) and conn.state is State.READY
    sent = [conn.request("evaluate", {"sample": {"n": n}, "target": {}}) for n in range(3)]
    sent.append(conn.request("evaluateMany", {"samples": [{"n": 7}, {"n": 8}], "target": {}}, expected_results=2))
    events = conn.feed(fake_adapter(b"".join(data for _, data in sent)))
    results = {e.id: e.result for e in events if isinstance(e, Reply)}
    assert results == {
        sent[0][0]: {"echo": 0},
        sent[1][0]: {"echo": 1},
        sent[2][0]: {"echo": 2},
        sent[3][0]: [{"echo": 7}, {"echo": 8}],
    }
    _, data = conn.request("close", {})
    conn.feed(fake_adapter(data))
    assert conn.state is State.CLOSED and not conn.pending and conn.violation is None
