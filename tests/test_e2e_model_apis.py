"""End to end through ``main([...])``: timeouts, retries and usage with real Python and command adapters."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from evalkit import ROOT, make_eval, read_json, run_cli

from glasskit_eval.adapters._procio import live_group_members

pytestmark = pytest.mark.e2e

CASE = """
video: cfr_h264.mp4
targets:
  t:
    samples:
    - at: [0.0, 0.5, 1.0]
      field: ok
      expect: true
"""

#: Python adapter whose behaviour per sample index is chosen by the adapter config (env-free).
PY_ADAPTER = """
import asyncio, threading, time
from glasskit_eval import TransientError

calls = {}

def create_evaluator(config):
    return Adapter(config.config, config.eval_dir)

class Adapter:
    def __init__(self, config, eval_dir):
        self.broken = (eval_dir / "broken").exists()
        self.mode = config.get("mode", "ok")
        self.fail_times = config.get("fail_times", 0)

    def evaluate(self, sample, target):
        n = calls[sample.sample_index] = calls.get(sample.sample_index, 0) + 1
        sample.report_usage(input_tokens=100, output_tokens=5, cost=0.01)
        if self.mode == "hang_sync" and sample.sample_index == 1:
            threading.Event().wait()
        if self.mode == "transient" and n <= self.fail_times:
            raise TransientError("429 slow down", retry_after=0.01)
        if self.mode == "permanent" and sample.sample_index == 1 and self.broken:
            raise ValueError("bad image")
        return {"ok": True}

class AsyncAdapter:
    async def evaluate(self, sample, target):
        if sample.sample_index == 1:
            await asyncio.sleep(3600)
        return {"ok": True}

def create_async(config):
    return AsyncAdapter()
"""

#: A raw NDJSON command adapter: hangs on sample 1 (noting the `cancel` it gets), fails
#: transiently the first `fail_times` calls of each sample, reports usage, writes its pid.
COMMAND_ADAPTER = r"""
import json, os, sys
state = {}
config = {}
os.makedirs(sys.argv[1], exist_ok=True)
open(os.path.join(sys.argv[1], "pid"), "w").write(str(os.getpid()))
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        config = message["params"]["config"]["config"]
        send({"id": message["id"], "result": {"protocolVersion": 1, "capabilities": {"evaluate": True}}})
    elif method == "cancel":
        open(os.path.join(sys.argv[1], "cancelled"), "a").write(str(message["params"]["id"]) + "\n")
    elif method == "close":
        send({"id": message["id"], "result": None})
        break
    elif method == "evaluate":
        index = message["params"]["sample"]["sampleIndex"]
        state[index] = state.get(index, 0) + 1
        if config.get("mode") == "hang" and index == 1:
            continue
        if state[index] <= config.get("fail_times", 0):
            send({"id": message["id"], "error": {"message": "503 overloaded", "transient": True,
                                                  "retryAfterS": 0.01}})
            continue
        send({"id": message["id"], "result": {"ok": True},
              "usage": {"input_tokens": 50, "cost": 0.002}})
"""


def python_eval(tmp_path: Path, config: dict[str, Any] | None = None) -> Path:
    eval_dir = make_eval(tmp_path, {"case": CASE}, adapter=PY_ADAPTER)
    (eval_dir / "broken").touch()
    if config is not None:
        import json

        (eval_dir / "adapter.yaml").write_text(json.dumps(config))
    return eval_dir


def command(tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "adapter_cmd.py"
    script.write_text(COMMAND_ADAPTER)
    state = tmp_path / "state"
    return shlex.join([sys.executable, str(script), str(state)]), state


def results(report: dict[str, Any], trial: int = 0) -> list[dict[str, Any]]:
    return list(report["trials"][trial]["results"])


def test_sync_python_call_past_the_timeout_is_a_timeout_error(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path, {"mode": "hang_sync"})
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--timeout", "0.2", "--keep-going",
                             "--output-json", report)
    assert code == 1, err
    got = results(read_json(report))
    assert [r["status"] for r in got] == ["passed", "error", "passed"]
    assert got[1]["error_kind"] == "timeout"
    assert "timed out after 0.2s" in got[1]["reason"]


def test_async_python_timeout_fails_fast_without_keep_going(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir / 'adapter.py'}:create_async",
                              "--timeout", "0.2")
    assert code == 2
    assert "sample 1" in err and "timed out after 0.2s" in err


def test_config_yaml_run_timeout_is_the_default_and_recorded(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path, {"mode": "hang_sync"})
    (eval_dir / "config.yaml").write_text("run:\n  timeout_s: 0.2\n")
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report)
    assert code == 1, err
    assert results(read_json(report))[1]["error_kind"] == "timeout"


def test_config_yaml_bad_run_timeout_is_reported_with_its_path(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path)
    (eval_dir / "config.yaml").write_text("run:\n  timeout_s: -1\n")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert "config.yaml" in err and "run.timeout_s" in err and "greater than zero" in err


def test_transient_errors_are_retried_and_attempts_reported(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path, {"mode": "transient", "fail_times": 2})
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--retries", "3", "--retry-backoff", "0.001",
                             "--output-json", report)
    assert code == 0, err
    data = read_json(report)
    assert [r["attempts"] for r in results(data)] == [3, 3, 3]
    # Every attempt reported its usage, and every attempt was paid for.
    assert results(data)[0]["usage"] == {"input_tokens": 300, "output_tokens": 15, "cost": pytest.approx(0.03)}
    assert data["summary"]["retried_samples"] == 3
    assert "Retried: 3 samples" in out


def test_too_few_retries_leave_an_adapter_error(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path, {"mode": "transient", "fail_times": 5})
    report = tmp_path / "r.json"
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--retries", "1", "--retry-backoff", "0",
                               "--keep-going", "--output-json", report)
    assert code == 1
    got = results(read_json(report))
    assert all(r["status"] == "error" and r["attempts"] == 2 and r["error_kind"] == "adapter" for r in got)
    assert "gave up after 2 attempts" in got[0]["reason"]


def test_permanent_errors_are_never_retried(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path, {"mode": "permanent"})
    report = tmp_path / "r.json"
    run_cli("run", "--eval-dir", eval_dir, "--retries", "4", "--retry-backoff", "0", "--keep-going",
            "--output-json", report)
    assert [r["attempts"] for r in results(read_json(report))] == [1, 1, 1]


def test_command_adapter_timeout_sends_cancel_and_leaves_no_process(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"case": CASE})
    (eval_dir / "adapter.yaml").write_text('{"mode": "hang"}')
    cmd, state = command(tmp_path)
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", cmd, "--timeout", "0.3",
                              "--keep-going", "--output-json", report)
    assert code == 1, err
    got = results(read_json(report))
    assert [r["status"] for r in got] == ["passed", "error", "passed"]
    assert got[1]["error_kind"] == "timeout"
    assert (state / "cancelled").read_text().split() == ["3"]  # initialize was request 1
    assert got[0]["usage"] == {"input_tokens": 50, "cost": 0.002}
    pid = int((state / "pid").read_text())
    assert not live_group_members(pid)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_command_adapter_transient_errors_are_retried(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"case": CASE})
    (eval_dir / "adapter.yaml").write_text('{"fail_times": 1}')
    cmd, _state = command(tmp_path)
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", cmd, "--retries", "2",
                              "--retry-backoff", "0", "--output-json", report)
    assert code == 0, err
    assert [r["attempts"] for r in results(read_json(report))] == [2, 2, 2]


def test_usage_sums_across_repeat_and_resume(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path, {"mode": "permanent"})
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--repeat", "2", "--keep-going",
                              "--output-json", report)
    assert code == 1
    data = read_json(report)
    assert data["summary"]["usage"] == {"input_tokens": 600, "output_tokens": 30, "cost": pytest.approx(0.06)}
    checkpoint = data["checkpoint"]["path"]
    # The adapter is fixed; the resume re-evaluates only the two errors and keeps recorded usage.
    (eval_dir / "broken").unlink()
    code, _out, err = run_cli("run", "--resume", checkpoint)
    assert code == 0, err
    data = read_json(report)
    assert data["summary"]["usage"] == {"input_tokens": 600, "output_tokens": 30, "cost": pytest.approx(0.06)}
    assert data["checkpoint"]["resumed"] is True


def test_resume_restores_the_call_options(tmp_path: Path) -> None:
    from glasskit_eval.commands.requests import RunRequest

    request = RunRequest.of(eval_dir=str(tmp_path), timeout_s=2.5, retries=3, retry_backoff_s=0.5,
                         max_calls_per_second=4.0)
    assert RunRequest.from_json(request.to_json(), tmp_path / "m.json") == request
    from glasskit_eval.errors import CheckpointError

    with pytest.raises(CheckpointError):
        RunRequest.from_json({**request.to_json(), "retries": -1}, tmp_path / "m.json")


def test_bad_option_values_are_usage_errors(tmp_path: Path) -> None:
    for argv in (["--timeout", "0"], ["--retries", "-1"], ["--max-calls-per-second", "nan"]):
        code, _out, err = run_cli("run", "--eval-dir", tmp_path, *argv)
        assert code == 2 and argv[0] in err





def test_cost_and_latency_gates(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path)
    report = tmp_path / "r.json"
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--max-cost", "0.02", "--max-p95-latency", "600",
                              "--output-json", report)
    assert code == 1
    gates = {g["name"]: g for g in read_json(report)["gates"]}
    assert not gates["max_cost"]["passed"] and "cost 0.03 > 0.02" in gates["max_cost"]["message"]
    assert gates["max_p95_latency"]["passed"]
    assert "max_cost" in out
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--max-cost", "0.05")
    assert code == 0
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--max-p95-latency", "0")
    assert code == 1


def test_config_yaml_cost_gate_and_case_files_refuse_it(tmp_path: Path) -> None:
    eval_dir = python_eval(tmp_path)
    (eval_dir / "config.yaml").write_text("thresholds:\n  max_cost: 0.01\n  max_p95_latency_s: 600\n")
    code, out, _err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 1 and "max_cost" in out
    (eval_dir / "cases" / "case.yaml").write_text(CASE + "thresholds:\n  max_cost: 1\n")
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2 and "max_cost" in err


def test_protocol_server_sends_transient_errors_and_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    eval_dir = python_eval(tmp_path, {"mode": "transient", "fail_times": 1})
    served = shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                         f"{eval_dir / 'adapter.py'}:create_evaluator"])
    report = tmp_path / "r.json"
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", served, "--retries", "2",
                              "--retry-backoff", "0", "--output-json", report)
    assert code == 0, err
    got = results(read_json(report))
    assert [r["attempts"] for r in got] == [2, 2, 2]
    # The failed attempt's report is lost with its error answer; the answered one arrives.
    assert got[0]["usage"] == {"input_tokens": 100, "output_tokens": 5, "cost": 0.01}
