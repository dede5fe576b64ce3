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
