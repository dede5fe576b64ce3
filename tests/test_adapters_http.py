"""The HTTP adapter against a real local server: happy path, errors, retries, timeouts, rate limit, secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import modelserver
import pytest
from evalkit import make_eval, read_json, run_cli
from modelserver import ModelServer

from glasskit_eval.adapters._http import HttpConfig, dig, retry_after_seconds
from glasskit_eval.errors import UsageError

model_server = modelserver.model_server

SECRET = "sk-secret-42"

CASE = """
video: cfr_h264.mp4
targets:
  size:
    samples:
    - at: [0.0, 0.5, 1.0]
      field: width
      expect: 128
"""


def http_eval(tmp_path: Path, server: ModelServer, path: str, **section: Any) -> Path:
    eval_dir = make_eval(tmp_path, {"case": CASE})
    adapter = {"type": "http", "url": server.url + path, "headers_env": {"Authorization": "GK_TEST_AUTH"},
               "headers": {"X-Client": "glasskit"}, "response_field": "observation",
               "usage_fields": {"input_tokens": "usage.prompt_tokens", "output_tokens": "usage.completion_tokens",
                                "cost": "usage.cost_usd"}, **section}
    (eval_dir / "adapter.yaml").write_text(json.dumps({"adapter": adapter}))
    return eval_dir


@pytest.fixture(autouse=True)
def auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GK_TEST_AUTH", f"Bearer {SECRET}")


def run_http(eval_dir: Path, tmp_path: Path, *argv: str) -> tuple[int, str, str, dict[str, Any]]:
    report = tmp_path / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *argv)
    return code, out, err, read_json(report) if report.exists() else {}


def results(report: dict[str, Any]) -> list[dict[str, Any]]:
    return list(report["trials"][0]["results"])


def assert_no_secret_anywhere(tmp_path: Path, *texts: str) -> None:
    for text in texts:
        assert SECRET not in text
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix not in (".mp4",):
            assert SECRET.encode() not in path.read_bytes(), path


def test_happy_path_with_headers_usage_and_keep_alive(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/ok")
    code, out, err, report = run_http(eval_dir, tmp_path, "--concurrency", "1")
    assert code == 0, err
    got = results(report)
    assert [r["observed"]["frameIndex"] for r in got] == [0, 5, 10]  # the fixture video is 10 fps
    assert all(r["observed"]["authorized"] and r["observed"]["mime"] == "image/png" for r in got)
    assert got[0]["usage"] == {"input_tokens": 120, "output_tokens": 7, "cost": 0.001}
    assert report["summary"]["usage"]["input_tokens"] == 360
    seen = model_server.requests("/ok")
    assert len(seen) == 3 and {s.headers["X-Client"] for s in seen} == {"glasskit"}
    assert len({s.port for s in seen}) == 1  # one kept-alive connection
    assert seen[0].body["target"]["id"] == "size" and seen[0].body["sample"]["sampleIndex"] == 0
    assert_no_secret_anywhere(tmp_path, out, err)


def test_adapter_http_url_on_the_command_line(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = make_eval(tmp_path, {"case": CASE.replace("field: width", "field: observation.width")})
    code, _out, err, report = run_http(eval_dir, tmp_path, "--adapter-http", model_server.url + "/ok")
    assert code == 0, err
    assert "usage" not in results(report)[0]


def test_jpeg_images(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/ok", image_format="jpeg", jpeg_quality=50)
    code, _out, err, report = run_http(eval_dir, tmp_path)
    assert code == 0, err
    assert results(report)[0]["observed"]["mime"] == "image/jpeg"


def test_503s_are_retried_with_backoff_and_attempts_recorded(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/flaky/2")
    code, out, err, report = run_http(eval_dir, tmp_path, "--retries", "3", "--retry-backoff", "0.05")
    assert code == 0, err
    assert [r["attempts"] for r in results(report)] == [3, 3, 3]
    assert report["summary"]["retried_samples"] == 3
    assert "Retried: 3 samples" in out


def test_429_retry_after_is_honoured(tmp_path: Path, model_server: ModelServer) -> None:
    model_server.retry_after = "0.3"
    eval_dir = http_eval(tmp_path, model_server, "/limited/1")
    code, _out, err, report = run_http(eval_dir, tmp_path, "--retries", "2", "--retry-backoff", "0")
    assert code == 0, err
    assert [r["attempts"] for r in results(report)] == [2, 2, 2]
    seen = model_server.requests("/limited")
    for index in (0, 1, 2):
        times = [s.at for s in seen if s.body["sample"]["sampleIndex"] == index]
        assert times[1] - times[0] >= 0.3  # recorded arrival times, not a wall-clock assert on the run


def test_without_retries_a_503_is_an_adapter_error(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/flaky/1")
    code, _out, err, report = run_http(eval_dir, tmp_path, "--keep-going")
    assert code == 1
    got = results(report)
    assert all(r["status"] == "error" and r["error_kind"] == "adapter" for r in got)
    assert "answered 503" in got[0]["reason"]


def test_4xx_is_not_retried(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/status/400")
    code, _out, err, report = run_http(eval_dir, tmp_path, "--retries", "3", "--retry-backoff", "0",
                                       "--keep-going")
    assert code == 1
    assert [r["attempts"] for r in results(report)] == [1, 1, 1]
    assert len(model_server.requests("/status")) == 3


def test_hanging_server_is_ended_by_the_timeout(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/hang")
    code, _out, err, report = run_http(eval_dir, tmp_path, "--timeout", "0.2", "--retries", "1",
                                       "--retry-backoff", "0", "--keep-going")
    assert code == 1
    got = results(report)
    assert all(r["error_kind"] == "timeout" and r["attempts"] == 2 for r in got)
    assert report["summary"]["timeout_errors"] == 3


def test_slow_answers_within_the_timeout_pass_and_show_latency(tmp_path: Path, model_server: ModelServer) -> None:
    model_server.slow_s = 0.2
    eval_dir = http_eval(tmp_path, model_server, "/slow")
    # With a latency gate the console shows the percentiles even for 3 samples.
    code, out, err, report = run_http(eval_dir, tmp_path, "--timeout", "20", "--concurrency", "3",
                                      "--max-p95-latency", "10")
    assert code == 0, err
    latency = report["summary"]["latency"]
    assert latency["count"] == 3 and latency["p50_s"] >= 0.2 and latency["max_s"] >= latency["p95_s"]
    assert report["by_target"]["size"]["latency"]["count"] == 3
    assert "Latency: p50" in out


def test_rate_limit_holds_on_average(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/ok")
    code, _out, err, _report = run_http(eval_dir, tmp_path, "--max-calls-per-second", "10", "--concurrency", "3")
    assert code == 0, err
    times = sorted(s.at for s in model_server.requests("/ok"))
    # Call starts are 0.1 s apart; the server sees the first one later by its connection set-up
    # (the others reuse the connection), which a loaded machine stretches. Unlimited, the three
    # would arrive within milliseconds.
    assert times[-1] - times[0] >= 2 / 10 - 0.05


def test_garbage_response_and_refused_connection(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/garbage")
    code, _out, _err, report = run_http(eval_dir, tmp_path, "--keep-going")
    assert code == 1 and "is not JSON: <html>not json</html>" in results(report)[0]["reason"]
    closed = make_eval(tmp_path / "closed", {"case": CASE})
    code, _out, err = run_cli("run", "--eval-dir", closed, "--adapter-http", "http://127.0.0.1:9/x")
    assert code == 2 and "HTTP adapter request to http://127.0.0.1:9/x failed" in err


def test_missing_secret_variable_is_named_without_values(tmp_path: Path, model_server: ModelServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GK_TEST_AUTH")
    eval_dir = http_eval(tmp_path, model_server, "/ok")
    code, _out, err, _report = run_http(eval_dir, tmp_path)
    assert code == 2 and "GK_TEST_AUTH" in err and "not set" in err


def test_batch_url(tmp_path: Path, model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/ok", batch_url=model_server.url + "/batch",
                         response_field="observations", usage_fields={"input_tokens": "usage.prompt_tokens"})
    code, _out, err, report = run_http(eval_dir, tmp_path)
    assert code == 0, err
    assert len(model_server.requests("/batch")) == 1
    got = results(report)
    assert got[0]["evaluation_timing_mode"] == "batch_amortized"
    assert sum(r["usage"]["input_tokens"] for r in got) == 30
    # Amortized share and the whole call: both latencies are reported.
    assert got[0]["call_duration_seconds"] == pytest.approx(3 * got[0]["evaluation_duration_seconds"])
    assert report["summary"]["batch_call_latency"]["count"] == 3
    assert report["summary"]["latency"]["max_s"] < report["summary"]["batch_call_latency"]["max_s"]


def test_config_errors() -> None:
    with pytest.raises(UsageError, match="needs url"):
        HttpConfig.parse({"type": "http"})
    with pytest.raises(UsageError, match="unknown keys api_key"):
        HttpConfig.parse({"type": "http", "url": "http://x", "api_key": "no"})
    with pytest.raises(UsageError, match="http:// or https://"):
        HttpConfig.parse({"type": "http", "url": "ftp://x"})
    with pytest.raises(UsageError, match="image_format"):
        HttpConfig.parse({"type": "http", "url": "http://x", "image_format": "gif"})


def test_dig_and_retry_after() -> None:
    assert dig({"a": [{"b": 3}]}, "a.0.b") == 3
    with pytest.raises(KeyError):
        dig({"a": []}, "a.0")
    assert retry_after_seconds("2") == 2
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480) == pytest.approx(10)
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


def test_a_hanging_batch_call_times_out_after_timeout_times_batch_size(tmp_path: Path,
                                                                       model_server: ModelServer) -> None:
    eval_dir = http_eval(tmp_path, model_server, "/ok", batch_url=model_server.url + "/hang")
    code, _out, err, report = run_http(eval_dir, tmp_path, "--timeout", "0.1", "--keep-going")
    assert code == 1, err
    got = results(report)
    assert [r["error_kind"] for r in got] == ["timeout"] * 3
    assert "timed out after 0.3s" in got[0]["reason"]


def test_a_2xx_body_that_is_not_json_is_an_adapter_error_retried_when_transient(
        tmp_path: Path, model_server: ModelServer) -> None:
    for path, attempts in (("/garbage", 1), ("/html", 3)):
        eval_dir = http_eval(tmp_path / path.strip("/"), model_server, path, response_field=None)
        code, _out, err, report = run_http(eval_dir, tmp_path, "--keep-going", "--retries", "2",
                                           "--retry-backoff", "0")
        assert code == 1, err
        got = results(report)
        assert all(r["status"] == "error" and r["error_kind"] == "adapter" and r["observed"] is None
                   and "with a body that is not JSON" in r["reason"] for r in got), got
        # Invalid JSON declared as JSON is the server's bug; a proxy's HTML page is worth a retry.
        assert [r["attempts"] for r in got] == [attempts] * 3, path


@pytest.mark.parametrize(("section", "mib", "limit"), [({}, 65, "64"), ({"max_response_mb": 1}, 2, "1")],
                         ids=["default", "configured"])
def test_a_response_body_over_the_limit_is_an_adapter_error(tmp_path: Path, model_server: ModelServer,
                                                            section: dict[str, Any], mib: int, limit: str) -> None:
    eval_dir = http_eval(tmp_path, model_server, f"/huge/{mib}", **section)
    code, _out, err, report = run_http(eval_dir, tmp_path, "--keep-going")
    assert code == 1, err
    for r in results(report):
        assert r["error_kind"] == "adapter" and f"answered more than {limit} MiB" in r["reason"], r["reason"]
        assert "max_response_mb" in r["reason"]
    assert (tmp_path / "report.json").stat().st_size < 1 << 20


def test_max_response_mb_is_checked() -> None:
    with pytest.raises(UsageError, match="max_response_mb must be a number"):
        HttpConfig.parse({"url": "http://127.0.0.1/x", "max_response_mb": 0})
    assert HttpConfig.parse({"url": "http://127.0.0.1/x"}).max_response_bytes == 64 << 20


def test_timeout_s_bounds_the_whole_request_not_each_read(tmp_path: Path, model_server: ModelServer) -> None:
    import time

    # 200 bytes at one per 50 ms: 10 s in all, though no single read waits more than 50 ms.
    eval_dir = http_eval(tmp_path, model_server, "/drip/200", timeout_s=0.5)
    started = time.monotonic()
    code, _out, err, report = run_http(eval_dir, tmp_path, "--keep-going", "--retries", "0")
    elapsed = time.monotonic() - started
    assert code == 1, err
    assert all("failed: timed out" in r["reason"] for r in results(report)), results(report)
    assert elapsed < 6, elapsed


def test_a_request_that_never_left_may_be_made_again_for_a_stream_one_that_left_may_not() -> None:
    import socket
    import threading

    from glasskit_eval.adapters._httpio import Pool, post_json
    from glasskit_eval.adapters.resilient import stream_retryable
    from glasskit_eval.errors import AdapterError

    # Nothing listens: the connection is refused before anything is sent.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/x"
    with pytest.raises(AdapterError) as refused:
        post_json(Pool(closed, 5), closed, b"{}", {})
    assert refused.value.transient and not refused.value.maybe_processed and stream_retryable(refused.value)

    # A server that reads the whole request, then hangs up without answering: it may have acted on it.
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/x"

    def hang_up() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"{}"):
                data += conn.recv(4096)

    thread = threading.Thread(target=hang_up)
    thread.start()
    try:
        with pytest.raises(AdapterError) as dropped:
            post_json(Pool(url, 5), url, b"{}", {})
    finally:
        thread.join()
        listener.close()
    assert dropped.value.transient and dropped.value.maybe_processed and not stream_retryable(dropped.value)
