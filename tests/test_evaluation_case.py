"""Adapter tracebacks: kept on error results (report, checkpoint, artifact JSON), shown on the console."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from evalkit import make_eval, read_json, run_cli

from glasskit_eval.results import SampleResult, Status
from glasskit_eval.support.tracebacks import adapter_traceback, last_frame

pytestmark = pytest.mark.frames

CASE = """
video: cfr_h264.mp4
targets:
  lights:
    samples:
    - at: [0.5, 1.0]
      expect: true
"""

RAISING = """
def create_evaluator(config):
    return E()

def deep(sample):
    if sample.sample_index == 1:
        raise ValueError("the model broke")
    return True

class E:
    def evaluate(self, sample, target):
        return deep(sample)
"""


def test_last_frame_of_python_and_javascript_stacks() -> None:
    py = ('Traceback (most recent call last):\n  File "/a/adapter.py", line 9, in evaluate\n    x()\n'
          '  File "/a/model.py", line 2, in x\n    raise E\nE\n')
    assert last_frame(py) == "/a/model.py:2 in x"
    js = "TypeError: nope\n    at predict (/app/model.mjs:12:5)\n    at main (/app/adapter.mjs:30:9)\n"
    assert last_frame(js) == "/app/model.mjs:12 in predict"
    assert last_frame("Error: x\n    at /app/a.mjs:3:1\n") == "/app/a.mjs:3 in <anonymous>"
    assert last_frame("just a message") is None


def test_adapter_traceback_prefers_a_carried_stack() -> None:
    from glasskit_eval.errors import AdapterError

    assert adapter_traceback(AdapterError("m", stack="Error: m\n    at f (x.js:1:1)")) == \
        "Error: m\n    at f (x.js:1:1)"
    try:
        raise KeyError("k")
    except KeyError as exc:
        text = adapter_traceback(exc)
    assert text.startswith("Traceback (most recent call last):\n") and text.endswith("KeyError: 'k'\n")
    assert "test_adapter_traceback_prefers_a_carried_stack" in text


def test_python_adapter_traceback_in_report_artifact_checkpoint_and_console(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, RAISING)
    report = tmp_path / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--save-failures",
                             "--output-json", report)
    assert code == 1, err  # the adapter_errors gate
    error = read_json(report)["trials"][0]["results"][1]
    assert error["status"] == "error"
    tb = error["traceback"]
    adapter = str(eval_dir / "adapter.py")
    assert f'File "{adapter}", line 7, in deep' in tb and tb.endswith("ValueError: the model broke\n")
    assert "glasskit_eval" not in tb and "asyncio" not in tb  # only the adapter's frames
    assert read_json(report)["trials"][0]["results"][0]["traceback"] is None
    artifact = read_json(Path(error["artifact_json"]))
    assert artifact["traceback"] == tb
    checkpoints = list((eval_dir / "runs" / "checkpoints").glob("*/records.jsonl"))
    records = [json.loads(line.split(" ", 1)[1]) for line in checkpoints[0].read_text().splitlines()[1:]]
    assert any(r["payload"].get("traceback") == tb for r in records)
    line = next(x for x in out.splitlines() if "ERROR walk/lights @1s" in x)
    assert line.endswith(f"(at {adapter}:7 in deep)")
    assert "ValueError: the model broke" in line  # in the reason, once
    assert "Traceback (most recent call last)" not in out

    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--verbose")
    assert "      | Traceback (most recent call last):" in out.splitlines()
    assert f'      |   File "{adapter}", line 7, in deep' in out.splitlines()


def test_command_adapter_stack_is_kept(tmp_path: Path) -> None:
    script = tmp_path / "adapter_cmd.py"
    script.write_text(RAISING)
    eval_dir = make_eval(tmp_path, {"walk": CASE})
    report = tmp_path / "report.json"
    command = shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server", f"{script}:create_evaluator"])
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-command", command, "--keep-going",
                             "--output-json", report)
    assert code == 1, err
    error = read_json(report)["trials"][0]["results"][1]
    assert f'File "{script}", line 7, in deep' in error["traceback"]
    assert f"(at {script}:7 in deep)" in out


def test_a_fail_fast_stop_names_the_adapter_line(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"walk": CASE}, RAISING)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert f"ValueError: the model broke (at {eval_dir / 'adapter.py'}:7 in deep)" in err


@pytest.mark.parametrize("bad", [{"traceback": 3}, {"traceback": ["x"]}])
def test_a_stored_traceback_must_be_text(bad: dict[str, object]) -> None:
    from glasskit_eval.results import ResultFormatError

    base = SampleResult(case="c", target="t", target_label=None, sample_index=0, timestamp_s=0.0, source="at",
                        status=Status.ERROR, expected=None, field=None, compare_mode=None, reason="r",
                        traceback="tb").to_json()
    assert SampleResult.from_json(base).traceback == "tb"
    with pytest.raises(ResultFormatError):
        SampleResult.from_json({**base, **bad})
