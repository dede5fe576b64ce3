"""Loading and calling Python adapters, and the errors users see when that goes wrong."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
from evalkit import make_eval, run_cli
from PIL import Image

from glasskit_eval.adapters.base import FactoryConfig, Sample, Target
from glasskit_eval.adapters.python import PythonAdapterSpec
from glasskit_eval.errors import AdapterError

CASE = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"


def write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "adapter.py"
    path.write_text(textwrap.dedent(source))
    return path


def create(target: str, tmp_path: Path) -> object:
    return asyncio.run(PythonAdapterSpec(target).create(FactoryConfig(eval_dir=tmp_path)))


@pytest.mark.parametrize(("target", "message"), [
    ("no_colon_here", "must look like <module-or-file>:<callable>"),
    ("{dir}/missing.py:create", "adapter file not found"),
    ("definitely_not_a_module_xyz:create", "adapter module 'definitely_not_a_module_xyz' not found"),
    ("{dir}/adapter.py:nope", "has no attribute 'nope'"),
    ("{dir}/adapter.py:VALUE", "is not callable"),
    ("{dir}/adapter.py:boom", "adapter factory '{dir}/adapter.py:boom' failed: RuntimeError: no credentials"),
    ("{dir}/adapter.py:empty", "has neither evaluate(sample, target) nor evaluate_many(samples, target)"),
    ("{dir}/adapter.py:two_args", "takes 2 required arguments"),
])
def test_loading_errors_are_clear(tmp_path: Path, target: str, message: str) -> None:
    write(tmp_path, """
        VALUE = 3
        def boom(config):
            raise RuntimeError("no credentials")
        def empty(config):
            return object()
        def two_args(a, b, c=1):
            return None
        """)
    with pytest.raises(AdapterError) as info:
        create(target.format(dir=tmp_path), tmp_path)
    assert message.format(dir=tmp_path) in str(info.value)


def test_import_error_inside_adapter_file(tmp_path: Path) -> None:
    write(tmp_path, "import not_installed_dependency_xyz\n")
    with pytest.raises(AdapterError, match=r"importing adapter file .* failed: ModuleNotFoundError"):
        create(f"{tmp_path}/adapter.py:x", tmp_path)


def test_adapter_file_can_import_its_siblings(tmp_path: Path) -> None:
    (tmp_path / "helpers_for_adapter_test.py").write_text("ANSWER = 42\n")
    write(tmp_path, """
        from helpers_for_adapter_test import ANSWER
        def check(image, target_id):
            return ANSWER
        """)
    evaluator = create(f"{tmp_path}/adapter.py:check", tmp_path)
    image = Image.new("RGB", (4, 4))
    sample = Sample(image, 0.0, 0, 0, "v.mp4", "c")
    assert asyncio.run(evaluator.evaluate(sample, Target("t", 0, None, {}))) == 42  # type: ignore[attr-defined]


def test_evaluate_many_wrong_count_fails_the_batch(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE}, """
        def create_evaluator(config):
            return E()
        class E:
            def evaluate_many(self, samples, target):
                return [True]
        """)
    code, _, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert "returned 1 observations for 2 samples" in err


def test_evaluate_many_failure_with_keep_going_errors_every_sample(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE}, """
        def create_evaluator(config):
            return E()
        class E:
            async def evaluate_many(self, samples, target):
                raise ValueError("provider down")
        """)
    report = tmp_path / "r.json"
    code, out, _ = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report)
    assert code == 1
    import json
    results = json.loads(report.read_text())["trials"][0]["results"]
    assert [r["status"] for r in results] == ["error", "error"]
    assert all("ValueError: provider down" in r["reason"] for r in results)
    assert all(r["evaluation_timing_mode"] == "batch_amortized" for r in results)


def test_close_is_called_even_after_a_fail_fast_error(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    eval_dir = make_eval(tmp_path, {"c": CASE}, f"""
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                raise RuntimeError("bad")
            async def close(self):
                open({str(marker)!r}, "w").close()
        """)
    assert run_cli("run", "--eval-dir", eval_dir)[0] == 2
    assert marker.exists()


def test_factory_config_fields(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    eval_dir = make_eval(tmp_path, {"c": CASE}, f"""
        def create_evaluator(config):
            with open({str(seen)!r}, "w") as handle:
                handle.write(repr((config.eval_dir.name, dict(config.config),
                                   config.artifacts_dir, config.verbose)))
            return lambda image, target_id: True
        """)
    cfg = tmp_path / "cfg.json"
    cfg.write_text('{"model": "m1"}')
    code, _, err = run_cli("run", "--eval-dir", eval_dir, "--adapter-config", cfg, "--verbose",
                           "--artifacts-dir", tmp_path / "art")
    assert code == 0, err  # the factory returned a simple function adapter
    assert seen.read_text() == repr(("eval", {"model": "m1"}, tmp_path / "art", True))


@pytest.mark.parametrize("returned", [
    "lambda image, target_id: {'index': read_frame_index(image), 'target': target_id}",
    "lambda sample, target: {'index': read_frame_index(sample.image), 'target': target.id}",
    "evaluate_async",
])
def test_a_factory_may_return_a_simple_function_adapter(tmp_path: Path, returned: str) -> None:
    from evalkit import TESTS, read_json

    case = ("video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n"
            "      expect: {target: t}\n      compare: {mode: json_subset}\n")
    eval_dir = make_eval(tmp_path, {"c": case}, f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from framecode import read_frame_index

        async def evaluate_async(sample, target):
            return {{'index': read_frame_index(sample.image), 'target': target.id}}

        def create_evaluator(config):
            return {returned}
        """)
    report = tmp_path / "r.json"
    code, _, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    assert code == 0, err
    observed = [r["observed"] for r in read_json(report)["trials"][0]["results"]]
    assert observed == [{"index": 5, "target": "t"}, {"index": 10, "target": "t"}]


def test_a_returned_function_with_other_parameter_names_is_explained(tmp_path: Path) -> None:
    write(tmp_path, "def create(config):\n    def judge(frame, name):\n        return True\n    return judge\n")
    with pytest.raises(AdapterError) as info:
        create(f"{tmp_path}/adapter.py:create", tmp_path)
    assert "returned the function judge(frame, name)" in str(info.value)
    assert "`image, target_id` or `sample, target`" in str(info.value)


# -- hostile adapters: whatever they raise, however they hang ---------------------


def _run_eval(tmp_path: Path, adapter: str, *extra: str, target: str = "create_evaluator") -> tuple[int, str]:
    eval_dir = tmp_path / "eval"
    if not eval_dir.exists():
        make_eval(tmp_path, {"c": CASE}, adapter)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:{target}", *extra)
    return code, err


@pytest.mark.parametrize(("raising", "shown"), [
    ("sys.exit(7)", "SystemExit: 7"),
    ("raise Stop('halt')", "Stop: halt"),
    ("raise KeyboardInterrupt", "KeyboardInterrupt"),
])
@pytest.mark.parametrize("kind", ["def", "async def"])
def test_base_exceptions_from_evaluate_are_adapter_errors(tmp_path: Path, raising: str, shown: str,
                                                          kind: str) -> None:
    adapter = f"""
        import sys
        class Stop(BaseException):
            pass
        {kind} check(image, target_id):
            {raising}
        """
    code, err = _run_eval(tmp_path, adapter, target="check")
    assert code == 2 and f"adapter failed for c/t sample 0 at 0.5s: {shown}" in err, err
    report = tmp_path / "r.json"
    code, err = _run_eval(tmp_path, adapter, "--keep-going", "--output-json", str(report), target="check")
    assert code == 1, err
    import json
    results = json.loads(report.read_text())["trials"][0]["results"]
    assert [(r["status"], r["error_kind"]) for r in results] == [("error", "adapter")] * 2
    assert all(shown in r["reason"] for r in results)


@pytest.mark.parametrize(("where", "shown"), [
    ("module", "importing adapter file {file} failed: SystemExit: 3"),
    ("factory", "adapter factory '{file}:create_evaluator' failed: SystemExit: 3"),
    ("close", "adapter {file}:create_evaluator: close() failed: SystemExit: 3"),
])
def test_sys_exit_while_loading_or_closing_is_an_adapter_error(tmp_path: Path, where: str, shown: str) -> None:
    adapter = f"""
        import sys
        if {where == "module"!r}:
            sys.exit(3)
        class A:
            def evaluate(self, sample, target):
                return True
            def close(self):
                if {where == "close"!r}:
                    sys.exit(3)
        def create_evaluator(config):
            if {where == "factory"!r}:
                sys.exit(3)
            return A()
        """
    code, err = _run_eval(tmp_path, adapter)
    assert code == 2 and shown.format(file=tmp_path / "eval" / "adapter.py") in err, err


def test_exception_whose_str_raises_is_still_described(tmp_path: Path) -> None:
    code, err = _run_eval(tmp_path, """
        class Weird(Exception):
            def __str__(self):
                raise ValueError("no")
        def create_evaluator(config):
            raise Weird()
        """)
    assert code == 2 and "failed: Weird: <its message could not be read: ValueError>" in err, err


def test_observation_of_a_dict_subclass_whose_iteration_raises_is_judged_by_its_contents(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": CASE.replace("expect: true", "field: ok\n      expect: true")}, """
        class Hostile(dict):
            def items(self):
                raise RuntimeError("no items")
            def __iter__(self):
                raise RuntimeError("no iteration")
        def check(image, target_id):
            return Hostile(ok=True)
        """)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:check")
    assert code == 0, err


def test_evaluate_many_returning_an_endless_iterator_is_an_error(tmp_path: Path) -> None:
    code, err = _run_eval(tmp_path, """
        import itertools
        class A:
            def evaluate_many(self, samples, target):
                return itertools.repeat(True)
        def create_evaluator(config):
            return A()
        """)
    assert code == 2 and "evaluate_many returned more than 2 observations for 2 samples" in err, err


def test_close_that_never_returns_is_abandoned_and_named(tmp_path: Path) -> None:
    code, err = _run_eval(tmp_path, """
        import threading
        class A:
            def evaluate(self, sample, target):
                return True
            def close(self):
                threading.Event().wait()
        def create_evaluator(config):
            return A()
        """)
    target = f"{tmp_path / 'eval' / 'adapter.py'}:create_evaluator"
    assert code == 2 and f"adapter {target}: close() did not return within 5s; it was abandoned" in err, err


def test_observation_with_a_lone_surrogate_is_an_adapter_error(tmp_path: Path) -> None:
    code, err = _run_eval(tmp_path, "def check(image, target_id):\n    return {'label': 'x' + chr(0xD800)}\n",
                          target="check")
    assert code == 2 and "value at label is a string with a lone surrogate (U+D800)" in err, err


# -- interrupts: real processes, real signals -------------------------------------------------


class _Cli:
    """``python -m glasskit_eval`` in a subprocess, read line by line from stderr."""

    def __init__(self, argv: list[str]) -> None:
        import subprocess
        import sys

        from evalkit import ROOT
        self.proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", *argv], cwd=ROOT, text=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines: list[str] = []

    def wait_for_line(self, text: str) -> None:
        assert self.proc.stderr is not None
        while not any(text in line for line in self.lines):
            line = self.proc.stderr.readline()
            assert line, f"exited before printing {text!r}: {''.join(self.lines)}"
            self.lines.append(line)

    def finish(self) -> tuple[int, str]:
        try:
            rest = self.proc.communicate(timeout=60)[1]
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode, "".join(self.lines) + rest


def _wait_for(path: Path, cli: _Cli) -> None:
    import time
    while not path.exists() and cli.proc.poll() is None:
        time.sleep(0.02)


def _interrupted(tmp_path: Path, adapter: str, target: str = "create_evaluator", twice: bool = False,
                 command: str = "run", to_worker: bool = False) -> tuple[int, str]:
    import os
    import signal
    eval_dir = make_eval(tmp_path, {"c": CASE}, adapter)
    cli = _Cli([command, "--eval-dir", str(eval_dir), "--adapter", f"{eval_dir}/adapter.py:{target}"])
    _wait_for(tmp_path / "mark", cli)
    if to_worker:
        # kill() with a thread's id hands the signal to that thread, as the kernel may do with
        # any signal sent to the process: the main thread must still wake up and act on it.
        workers = sorted(int(t) for t in os.listdir(f"/proc/{cli.proc.pid}/task") if int(t) != cli.proc.pid)
        assert workers, "the adapter code runs on a worker thread"
        os.kill(workers[-1], signal.SIGINT)
    else:
        cli.proc.send_signal(signal.SIGINT)
    if twice:
        cli.wait_for_line("SIGINT received: stopping")
        cli.proc.send_signal(signal.SIGINT)
    return cli.finish()


@pytest.mark.parametrize("to_worker", [False, pytest.param(True, marks=pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to signal one thread"))],
    ids=["to-process", "to-worker-thread"])
@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize("where", ["module", "factory"])
def test_sigint_stops_a_slow_synchronous_import_or_factory(tmp_path: Path, where: str, command: str,
                                                           to_worker: bool) -> None:
    mark = tmp_path / "mark"
    code, err = _interrupted(tmp_path, f"""
        import threading
        def block():
            open({str(mark)!r}, "w").close()
            threading.Event().wait(600)  # a model load that takes its time
        if {where == "module"!r}:
            block()
        def create_evaluator(config):
            block()
        """, command=command, to_worker=to_worker)
    assert code == 130 and "interrupted by SIGINT" in err, err
    assert "SIGINT received: stopping" in err  # the orderly path, in both commands


def test_second_sigint_forces_exit_while_an_async_evaluate_never_awaits(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    code, err = _interrupted(tmp_path, f"""
        async def check(image, target_id):
            open({str(mark)!r}, "w").close()
            while True:  # holds the event loop: the first SIGINT cannot be acted on
                pass
        """, target="check", twice=True)
    assert code == 130, err
    assert "SIGINT received again: exiting now" in err


def test_sigint_waits_for_running_sync_calls_before_closing_once(tmp_path: Path) -> None:
    import signal
    mark, release, log = tmp_path / "mark", tmp_path / "release", tmp_path / "log"
    adapter = f"""
        import os, time
        def log(text):
            with open({str(log)!r}, "a") as f:
                f.write(text + "\\n")
        class A:
            def evaluate(self, sample, target):
                open({str(mark)!r}, "w").close()
                while not os.path.exists({str(release)!r}):
                    time.sleep(0.01)
                log("evaluate returned")
                return True
            def close(self):
                log("close")
        def create_evaluator(config):
            return A()
        """
    eval_dir = make_eval(tmp_path, {"c": CASE}, adapter)
    cli = _Cli(["run", "--eval-dir", str(eval_dir), "--concurrency", "1"])
    _wait_for(mark, cli)
    cli.proc.send_signal(signal.SIGINT)
    cli.wait_for_line("SIGINT received: stopping")
    release.touch()
    code, err = cli.finish()
    assert code == 130 and "interrupted by SIGINT" in err, err
    assert log.read_text().splitlines() == ["evaluate returned", "close"]


def test_sync_calls_that_outlive_the_grace_period_are_abandoned_and_said_so(tmp_path: Path) -> None:
    mark, log = tmp_path / "mark", tmp_path / "log"
    code, err = _interrupted(tmp_path, f"""
        import threading
        class A:
            def evaluate(self, sample, target):
                open({str(mark)!r}, "w").close()
                threading.Event().wait(600)
            def close(self):
                with open({str(log)!r}, "a") as f:
                    f.write("close\\n")
        def create_evaluator(config):
            return A()
        """)
    assert code == 130 and "interrupted by SIGINT" in err, err
    assert "1 call still running 5s after the run stopped calling it; abandoned" in err
    assert log.read_text() == "close\n"


OVERSIZED = """
BLOCK = "x" * (1 << 20)

def create_evaluator(config):
    return Oversized()

class Oversized:
    def evaluate(self, sample, target):
        if sample.timestamp_s == 0.5:
            return [BLOCK] * 300  # 300 MB as JSON, 1 MB in memory
        if sample.timestamp_s == 1.0:
            raise RuntimeError("z" * 5_000_000)
        return {"answer": BLOCK}
"""


def test_oversized_observations_tracebacks_and_messages_are_cut_in_every_output(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0, 1.5]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"case": case}, OVERSIZED)
    report, junit = tmp_path / "r.json", tmp_path / "junit.xml"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report,
                             "--junit-xml", junit)
    assert code == 1, err
    import json

    huge, raised, long = json.loads(report.read_text())["trials"][0]["results"]
    assert huge["error_kind"] == "adapter" and "is larger than 64 MiB as JSON" in huge["reason"]
    assert raised["error_kind"] == "adapter" and "more characters not shown" in raised["reason"]
    assert len(raised["reason"]) < 5000
    assert raised["traceback"].startswith("Traceback") and "more characters not shown" in raised["traceback"]
    assert len(raised["traceback"]) < 21_000
    assert long["status"] == "failed" and isinstance(long["observed"], str)
    assert long["observed"].startswith('{"answer": "xxx') and "more characters not shown" in long["observed"]
    for path in (report, junit):
        assert path.stat().st_size < 1 << 20, path
    assert len(out) + len(err) < 1 << 20


def test_the_first_ctrl_c_acts_while_a_300_mb_observation_is_being_checked(tmp_path: Path) -> None:
    import signal
    mark = tmp_path / "mark"
    # 300 MB of references to one small object: checking it walks millions of items (seconds)
    # before it is refused at 64 MiB of JSON, and the interrupt must not wait for that walk.
    adapter = f"""
        ROW = {{"a": 1, "b": 2.5, "c": None, "d": True}}
        CHUNK = [ROW] * 1000
        class A:
            def evaluate(self, sample, target):
                value = [list(CHUNK) for _ in range(37_500)]
                open({str(mark)!r}, "w").close()
                return value
        def create_evaluator(config):
            return A()
        """
    eval_dir = make_eval(tmp_path, {"c": CASE}, adapter)
    cli = _Cli(["run", "--eval-dir", str(eval_dir), "--concurrency", "1"])
    _wait_for(mark, cli)
    cli.proc.send_signal(signal.SIGINT)
    code, err = cli.finish()
    assert code == 130, err
    assert "SIGINT received: stopping" in err and "Eval interrupted by SIGINT." in err, err
    assert "exiting now" not in err and "Traceback" not in err, err
    # Stopped inside the check: the sample that returned the value has no result yet.
    assert "0 of 2 samples finished and saved in the checkpoint." in err, err
