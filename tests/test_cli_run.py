"""End-to-end `run` through `main([...])` with real videos and real Python adapters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from evalkit import FRAMECODE_ADAPTER, ROOT, interrupt_when_marked, make_eval, read_json, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.frames]

TWO_TARGETS = """
video: cfr_h264.mp4
targets:
  ready:
    label: Ready
    config: {k: 1}
    samples:
    - at: [0.5, 1.0]
      expect: true
    - range: [1.5, 1.9]
      every_s: 0.2
      expect: true
  other:
    samples:
    - at: 0
      expect: true
    - at: 0.3
      expect: true
      ignore: known bad frame
"""

UPSTREAM_TOP_KEYS = {"cases", "checkpoint", "eval_dir", "gates", "repeat_count", "report_type",
                     "schema_version", "stability", "success", "summary", "trials"}
UPSTREAM_RESULT_KEYS = {"artifact_image", "artifact_json", "case", "compare_mode",
                        "evaluation_duration_seconds", "evaluation_timing_mode", "expected", "field",
                        "observed", "observed_value", "reason", "sample_index", "source", "status", "target",
                        "target_label", "timestamp_s"}
#: Ours beside upstream's: latency, retries, timeouts and usage.
OUR_SUMMARY_KEYS = {"batch_call_latency", "latency", "minimum_detectable_drop", "pass_rate_ci", "retried_samples",
                    "timeout_errors", "usage"}
OUR_TOP_KEYS = {"by_target", "by_case"}
UPSTREAM_SUMMARY_KEYS = {"attempt_pass_rate", "average_evaluation_seconds_per_attempt",
                         "consistently_failed_samples", "consistently_passed_samples", "duration_seconds",
                         "error_attempts", "error_samples", "evaluated_attempts", "evaluated_samples",
                         "evaluation_timing_mode", "failed_attempts", "flaky_samples", "ignored_samples",
                         "maximum_trial_pass_rate", "mean_trial_pass_rate", "minimum_trial_pass_rate",
                         "passed_attempts", "successful_trials", "throughput_attempts_per_second", "trials"}


def test_demo_eval_passes_as_a_subprocess(tmp_path: Path) -> None:
    import shutil

    demo = tmp_path / "eval"
    shutil.copytree(ROOT / "fixtures" / "demo" / "eval", demo, ignore=shutil.ignore_patterns("runs"))
    proc = subprocess.run([sys.executable, "-m", "glasskit_eval", "run", "--eval-dir", str(demo)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Pass rate: 100.0%" in proc.stdout
    assert "By target" in proc.stdout


def test_report_has_upstream_keys_plus_frame_fields(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS}, "def create_evaluator(config):\n"
                         "    class E:\n        def evaluate(self, sample, target):\n            return True\n"
                         "    return E()\n")
    report_path = tmp_path / "out" / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report_path)
    assert code == 0, err
    text = report_path.read_text()
    report = json.loads(text)
    assert text == json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert set(report) == UPSTREAM_TOP_KEYS | OUR_TOP_KEYS
    assert report["schema_version"] == 1 and report["report_type"] == "eval_run"
    assert set(report["summary"]) == UPSTREAM_SUMMARY_KEYS | OUR_SUMMARY_KEYS
    results = report["trials"][0]["results"]
    assert [r["sample_index"] for r in results] == [0, 1, 2, 3, 4, 5]
    for r in results:
        assert UPSTREAM_RESULT_KEYS <= set(r)
        assert set(r) - UPSTREAM_RESULT_KEYS <= {"frame_index", "media_timestamp_s", "error_kind", "traceback",
                                                 "attempts", "usage", "call_duration_seconds"}
    by_time = {(r["target"], r["timestamp_s"]): r for r in results}
    assert by_time[("ready", 1.7)]["frame_index"] == 17
    assert by_time[("ready", 1.7)]["media_timestamp_s"] == pytest.approx(1.7)
    assert by_time[("ready", 1.5)]["source"] == "range [1.5, 1.9)"
    ignored = by_time[("other", 0.3)]
    assert ignored["status"] == "ignored" and ignored["reason"] == "known bad frame"
    assert ignored["frame_index"] is None
    assert report["summary"]["ignored_samples"] == 1
    assert report["summary"]["evaluated_samples"] == 5
    assert report["trials"][0]["gates"] == [{"message": "no adapter/comparison errors",
                                             "name": "adapter_errors", "passed": True}]


@pytest.mark.parametrize("video", ["rotate90.mp4", "rotate270.m4v", "rotate180.mov", "mirror.mp4",
                                   "mirror_rotate90.mp4", "bframes_h264.mp4", "vfr_h264.mp4",
                                   "start_offset_bframes_h264.mov", "vp9.webm", "h264.mkv", "mpeg4.mov"])
def test_adapter_receives_the_exact_display_oriented_frame(tmp_path: Path, video: str) -> None:
    manifest = json.loads((ROOT / "fixtures" / "videos" / "manifest.json").read_text())[video]
    from fractions import Fraction
    times = [Fraction(t) for t in manifest["frame_times"]]
    # Ask for (the decimal nearest to) every third frame's time, plus halfway points, and
    # expect the nearest frame's index back from its pixels.
    wanted = [Fraction(repr(float(t))) for t in times[::3]]
    wanted += [Fraction(repr(float((a + b) / 2))) for a, b in zip(times[1::4], times[2::4])]

    def nearest(want: Fraction) -> int:
        return min(range(len(times)), key=lambda i: (abs(times[i] - want), i))

    samples = "\n".join(f"    - at: {float(w)!r}\n      expect: {nearest(w)}" for w in sorted(set(wanted)))
    case = f"video: {video}\ntargets:\n  frame:\n    sample_defaults:\n      field: index\n    samples:\n{samples}\n"
    eval_dir = make_eval(tmp_path, {"c": case}, FRAMECODE_ADAPTER, videos=(video,))
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, "--min-pass-rate", "1")
    assert code == 0, out + err
    results = read_json(report)["trials"][0]["results"]
    assert len(results) >= 8
    for r in results:
        assert r["observed"]["index"] == r["observed"]["frame_index"] == r["frame_index"]
        assert r["observed"]["size"] == [manifest["display_width"], manifest["display_height"]]


ADAPTER_FORMS = {
    "factory_with_config": ("adapter.py:create_evaluator", """
        def create_evaluator(config):
            assert config.config == {"threshold": 3}, config.config
            assert config.eval_dir.name == "eval"
            return E()
        class E:
            def evaluate(self, sample, target):
                return target.config.get("k") == 1 or target.id == "other"
        """),
    "no_arg_async_factory": ("adapter.py:make", """
        async def make():
            return E()
        class E:
            async def evaluate(self, sample, target):
                return True
            async def close(self):
                pass
        """),
    "class_target": ("adapter.py:E", """
        class E:
            def evaluate(self, sample, target):
                return True
        """),
    "nested_attribute": ("adapter.py:Adapters.build", """
        class E:
            def evaluate(self, sample, target):
                return True
        class Adapters:
            @staticmethod
            def build(config):
                return E()
        """),
    "simple_image_target_id": ("adapter.py:check", """
        def check(image, target_id):
            assert image.mode == "RGB"
            return True
        """),
    "simple_sample_target": ("adapter.py:check", """
        def check(sample, target):
            return sample.case_name == "basic" and sample.video_path.endswith("cfr_h264.mp4")
        """),
    "batch_wins_over_evaluate": ("adapter.py:create_evaluator", """
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                raise AssertionError("evaluate_many must take precedence")
            async def evaluate_many(self, samples, target):
                assert [s.sample_index for s in samples] == sorted(s.sample_index for s in samples)
                return [True for _ in samples]
        """),
}


@pytest.mark.parametrize("form", sorted(ADAPTER_FORMS))
def test_every_adapter_loading_form(tmp_path: Path, form: str) -> None:
    target, source = ADAPTER_FORMS[form]
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS}, source)
    (eval_dir / "adapter.yaml").write_text("threshold: 3\n")
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/{target}",
                             "--min-pass-rate", "1")
    assert code == 0, out + err
    assert "5 evaluated, 5 passed" in out


def test_module_import_path_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS})
    pkg = tmp_path / "myapp"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "evals.py").write_text("def create_evaluator(config):\n    return lambda: None\n"
                                  "class Holder:\n    class Inner:\n        def evaluate(self, s, t):\n"
                                  "            return True\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", "myapp.evals:Holder.Inner")
    assert code == 0, out + err


def test_fail_fast_error_names_the_sample_and_exits_2(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS}, """
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                if sample.timestamp_s == 1.0:
                    raise RuntimeError("model timeout")
                return True
        """)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", tmp_path / "r.json")
    assert code == 2
    assert "basic/ready sample 1 at 1.0s" in err and "RuntimeError: model timeout" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_keep_going_records_errors_and_fails_the_adapter_errors_gate(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS}, """
        import math
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                if sample.timestamp_s == 1.0:
                    raise RuntimeError("model timeout")
                if sample.timestamp_s == 1.5:
                    return math.nan
                return True
        """)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--output-json", report)
    assert code == 1, err
    data = read_json(report)
    errors = [r for r in data["trials"][0]["results"] if r["status"] == "error"]
    assert [r["timestamp_s"] for r in errors] == [1.0, 1.5]
    assert "NaN" in errors[1]["reason"]
    gate = data["trials"][0]["gates"][0]
    assert gate == {"name": "adapter_errors", "passed": False, "message": "2 adapter/comparison errors"}
    assert data["checkpoint"]["resumable_adapter_errors"] == 2


def test_gates_decide_the_exit_code(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS}, """
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                return target.id == "other"
        """)
    assert run_cli("run", "--eval-dir", eval_dir)[0] == 0  # no gate configured
    code, out, _ = run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "0.5")
    assert code == 1
    assert "eval_min_pass_rate" in out and "20.0% pass rate (gate: >= 50.0%)" in out
    assert run_cli("run", "--eval-dir", eval_dir, "--max-failures", "4")[0] == 0
    assert run_cli("run", "--eval-dir", eval_dir, "--max-failures", "3")[0] == 1


def test_concurrency_bounds_calls_and_keeps_declaration_order(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - range: [0, 1.9]\n      every_s: 0.1\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, """
        import asyncio, random
        state = {"now": 0, "max": 0}
        def create_evaluator(config):
            return E()
        class E:
            async def evaluate(self, sample, target):
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
                await asyncio.sleep(random.Random(sample.sample_index).random() / 100)
                state["now"] -= 1
                return {"max": state["max"]}
        """)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--concurrency", "3", "--output-json", report,
                             "--keep-going")
    assert code == 0, err
    results = read_json(report)["trials"][0]["results"]
    assert [r["sample_index"] for r in results] == list(range(19))
    peak = max(r["observed"]["max"] for r in results)
    assert 1 < peak <= 3


def test_blocking_sync_adapter_runs_on_threads(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0, 0.5, 1.0, 1.5]\n      expect: 2\n"
    eval_dir = make_eval(tmp_path, {"c": case}, """
        import threading
        barrier = threading.Barrier(2, timeout=10)
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                barrier.wait()  # only returns when two calls block at once
                return 2
        """)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--concurrency", "2", "--min-pass-rate", "1")
    assert code == 0, out + err


def test_ignored_samples_are_never_sent(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"basic": TWO_TARGETS}, """
        def create_evaluator(config):
            return E()
        class E:
            def evaluate(self, sample, target):
                assert sample.timestamp_s != 0.3, "ignored sample was sent"
                return True
        """)
    assert run_cli("run", "--eval-dir", eval_dir)[0] == 0


def test_past_end_sample_fails_before_the_adapter_is_loaded(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [1.0, 2.2]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, "raise SystemExit('adapter must not load')\n")
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 2
    assert "targets.t.samples[0]" in err and "past the end" in err


def test_end_tolerance_accepts_rounding_past_the_last_frame(tmp_path: Path) -> None:
    # cfr_h264.mp4: 20 frames at 10 fps, last frame at 1.9 s, clip ends at 2.0 s.
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [2.0, 2.05]\n      expect: 19\n"
    eval_dir = make_eval(tmp_path, {"c": case}, FRAMECODE_ADAPTER.replace(
        'return {"index"', 'return read_frame_index(sample.image)\n        return {"index"'))
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "1")
    assert code == 0, out + err


def test_repeat_reports_trials_and_flaky_samples(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  flip:\n    samples:\n    - at: [0.5, 1.0, 1.5]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"rep": case}, """
        trial = {"n": 0}
        def create_evaluator(config):
            trial["n"] += 1
            return E(trial["n"])
        class E:
            def __init__(self, n):
                self.n = n
            def evaluate(self, sample, target):
                if sample.timestamp_s == 0.5:
                    return self.n != 2
                return sample.timestamp_s == 1.0
        """)
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--repeat", "3", "--max-flaky-samples", "0",
                             "--output-json", report)
    assert code == 1, err
    data = read_json(report)
    assert data["repeat_count"] == 3 and len(data["trials"]) == 3
    assert data["gates"] == [{"message": "1 flaky samples (gate: <= 0)", "name": "max_flaky_samples",
                              "passed": False}]
    flaky = [s for s in data["stability"] if s["flaky"]]
    assert [(s["timestamp_s"], s["statuses"]) for s in flaky] == [(0.5, ["passed", "failed", "passed"])]
    assert data["summary"]["consistently_failed_samples"] == 1
    assert "Unstable and failing samples" in out and "P/F/P" in out


def test_max_flaky_samples_requires_repeat(tmp_path: Path) -> None:
    code, _, err = run_cli("run", "--eval-dir", tmp_path, "--max-flaky-samples", "0")
    assert code == 2 and "--repeat" in err


def test_save_failures_writes_jpeg_and_json(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, "def check(image, target_id):\n    return False\n")
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", f"{eval_dir}/adapter.py:check",
                             "--save-failures", "--output-json", report)
    assert code == 0, err
    results = read_json(report)["trials"][0]["results"]
    for r in results:
        image, meta = Path(r["artifact_image"]), Path(r["artifact_json"])
        assert image.parent == eval_dir / "runs" / "failures" / "trial-001"
        assert image.read_bytes()[:3] == b"\xff\xd8\xff"
        record = json.loads(meta.read_text())
        assert record["trial"] == 1 and record["expected"] is True and record["observed"] is False


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run_cli("run", "--concurrency", "0")[0] == 2
    assert run_cli("run", "--at", "1.0")[0] == 2
    assert run_cli("run", "--case", "x", "--at", "1", "--from", "0")[0] == 2
    assert run_cli("run", "--min-pass-rate", "1.5")[0] == 2
    code, _, err = run_cli("run", "--adapter", "a:b", "--adapter-command", "node x.js", "--eval-dir", tmp_path)
    assert code == 2
    assert run_cli("run", "--eval-dir", tmp_path / "missing")[0] == 2


def test_fail_fast_cancels_calls_that_never_answer(tmp_path: Path) -> None:
    flag = tmp_path / "cancelled"
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, f"""
        import asyncio
        def create_evaluator(config):
            return E()
        class E:
            async def evaluate(self, sample, target):
                if sample.timestamp_s == 0.5:
                    try:
                        await asyncio.sleep(30)
                    except asyncio.CancelledError:
                        open({str(flag)!r}, "w").close()
                        raise
                    raise RuntimeError("the hung call finished instead of being cancelled")
                await asyncio.sleep(0.01)
                raise RuntimeError("fast failure")
        """)
    code, _, err = run_cli("run", "--eval-dir", eval_dir, "--concurrency", "2")
    assert code == 2
    assert "fast failure" in err
    assert flag.exists()


def test_comparator_crash_aborts_unless_keep_going(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import glasskit_eval.evaluation._judge as execution

    def broken(expected: object, observed: object, config: object) -> object:
        raise ZeroDivisionError("comparator bug")

    # A comparator bug cannot be caused through the public API; simulate one.
    monkeypatch.setattr(execution, "compare_values", broken)
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, "def check(image, target_id):\n    return True\n")
    adapter = f"{eval_dir}/adapter.py:check"
    code, _, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", adapter)
    assert code == 2 and "comparison_error: ZeroDivisionError: comparator bug" in err
    report = tmp_path / "r.json"
    code, _, _ = run_cli("run", "--eval-dir", eval_dir, "--adapter", adapter, "--keep-going", "--output-json", report)
    assert code == 1
    results = read_json(report)["trials"][0]["results"]
    assert [(r["status"], r["error_kind"]) for r in results] == [("error", "comparison")] * 2
    assert read_json(report)["checkpoint"]["resumable_adapter_errors"] == 0


def test_sigint_ends_a_run_even_when_a_sync_adapter_call_never_returns(tmp_path: Path) -> None:
    mark = tmp_path / "blocked"
    case = "video: cfr_h264.mp4\ntargets:\n  t:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"
    eval_dir = make_eval(tmp_path, {"c": case}, f"""
        import time
        def check(image, target_id):
            open({str(mark)!r}, "w").close()
            time.sleep(600)  # a hung backend call that ignores everything
            return True
        """)
    code, err = interrupt_when_marked(["run", "--eval-dir", str(eval_dir),
                                       "--adapter", f"{eval_dir}/adapter.py:check"], mark)
    assert code == 130  # 128 + SIGINT, as upstream and shells report Ctrl+C
    assert "interrupted by SIGINT" in err


def test_config_per_target_gate_naming_no_declared_target_fails_with_its_line(tmp_path: Path) -> None:
    case = "video: cfr_h264.mp4\ntargets:\n  door:\n    samples:\n    - at: [0.5, 1.0]\n      expect: true\n"
    config = "thresholds:\n  min_pass_rate: 0.5\n  per_target:\n    door: {min_pass_rate: 0.5}\n" \
             "    dor: {min_pass_rate: 0.9}\n"
    eval_dir = make_eval(tmp_path, {"a": case, "b": case}, "def check(image, target_id):\n    return True\n",
                         config=config)
    adapter = f"{eval_dir}/adapter.py:check"
    why = ("no case declares target 'dor', named in config.yaml:5 (thresholds.per_target.dor); "
           "fix the target id or remove the gate")
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", adapter, "--output-json", report)
    assert code == 1, out + err
    assert why in " ".join((out + err).split())  # the table wraps long details
    gates = {g["name"]: g for g in read_json(report)["trials"][0]["gates"]}
    assert gates["eval_dor_min_pass_rate"] == {"name": "eval_dor_min_pass_rate", "passed": False, "message": why}
    assert gates["eval_door_min_pass_rate"]["passed"] is True
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 0 and f"warning: gate eval_dor_min_pass_rate will fail: {why}" in err, out + err
    # A filter may leave a target out on purpose: the gate is skipped, as upstream does.
    for selection in (("--case", "a"), ("--target", "door")):
        code, out, err = run_cli("run", "--eval-dir", eval_dir, "--adapter", adapter, *selection,
                                 "--output-json", report)
        assert code == 0, out + err
        assert "eval_dor_min_pass_rate" not in {g["name"] for g in read_json(report)["trials"][0]["gates"]}
        code, out, err = run_cli("validate", "--eval-dir", eval_dir, *selection)
        assert code == 0 and "warning" not in err

