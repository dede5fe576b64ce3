"""JUnit XML: XSD validation, a real consumer's parse (junitparser), lines of sample blocks, resume."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from cikit import ci_eval, set_overrides
from evalkit import read_json, run_cli

junitparser = pytest.importorskip("junitparser")
etree = pytest.importorskip("lxml.etree")

XSD = Path(__file__).parent / "data" / "junit" / "junit-ci.xsd"


def validate(path: Path) -> None:
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    document = etree.parse(str(path))
    assert schema.validate(document), schema.error_log


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # `file` attributes are relative to the cwd; GitHub annotations are off unless asked for.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return tmp_path


def suites(path: Path) -> dict[str, junitparser.TestSuite]:
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {suite.name: suite for suite in xml}


def test_one_suite_per_case_and_target_with_lines_and_outcomes(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp, {"door/size/0": "raise"})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--junit-xml", "out/junit.xml")
    assert code == 1, err  # the adapter error fails the adapter_errors gate
    path = in_tmp / "out" / "junit.xml"
    validate(path)
    by_name = suites(path)
    assert list(by_name) == ["door / idx", "door / size", "lamp / idx", "gates"]
    door = by_name["door / idx"]
    assert (door.tests, door.failures, door.errors, door.skipped) == (5, 2, 0, 1)
    cases = {c.name: c for c in door}
    # In time order, named so that viewers sorting by name keep it.
    assert list(cases) == ["idx @ 0.300s", "idx @ 0.500s", "idx @ 1.000s", "idx @ 1.500s", "idx @ 1.700s"]
    # Block style after a comment (line 7), flow style (line 10), the ignored block (line 11).
    lines = {name: (c.classname, c._elem.get("file"), c._elem.get("line")) for name, c in cases.items()}
    assert lines == {"idx @ 0.500s": ("door", "eval/cases/door.yaml", "7"),
                     "idx @ 1.000s": ("door", "eval/cases/door.yaml", "7"),
                     "idx @ 1.500s": ("door", "eval/cases/door.yaml", "10"),
                     "idx @ 1.700s": ("door", "eval/cases/door.yaml", "10"),
                     "idx @ 0.300s": ("door", "eval/cases/door.yaml", "11")}
    text = (eval_dir / "cases" / "door.yaml").read_text().splitlines()
    assert text[6] == "    - at: [0.5, 1.0]" and text[9].startswith("    - {range:") and "at: 0.3" in text[10]
    assert cases["idx @ 0.500s"].is_passed
    failure = cases["idx @ 1.000s"].result[0]
    assert isinstance(failure, junitparser.Failure)
    assert failure.message == "expected 5, observed 10"
    assert failure.text == ("expected: 5\nfield: index\nobserved: 10\nframe: 10 (media time 1s)\n"
                            "reason: expected 5, observed 10\n"
                            "review: python -m glasskit_eval review --eval-dir eval --case door --target idx "
                            "--time 1\n")
    skipped = cases["idx @ 0.300s"].result[0]
    assert isinstance(skipped, junitparser.Skipped)
    assert skipped.message == "known bad: a 'quoted', 100% ignored frame"
    size = list(by_name["door / size"])
    assert len(size) == 1 and size[0]._elem.get("line") == "16"
    error = size[0].result[0]
    assert isinstance(error, junitparser.Error)
    assert error.message == ("adapter_error: adapter failed for door/size sample 5 at 0.0s: "
                             "RuntimeError: boom: door/size/0")
    assert error.type == "adapter_error"
    gates = list(by_name["gates"])
    assert [g.name for g in gates] == ["adapter_errors"]
    assert isinstance(gates[0].result[0], junitparser.Failure)
    assert gates[0].result[0].message == "1 adapter/comparison errors"
    # Times are evaluation durations: the suite's time is the sum of its samples'.
    report_total = sum(float(c.time) for c in door)
    assert door.time == pytest.approx(report_total, abs=0.006)


def test_repeat_gives_a_suite_per_trial_and_failing_gates_are_failures(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--repeat", "2", "--min-pass-rate", "0.9",
                              "--max-flaky-samples", "0", "--junit-xml", "j.xml")
    assert code == 1, err
    validate(in_tmp / "j.xml")
    by_name = suites(in_tmp / "j.xml")
    assert list(by_name) == ["door / idx [trial 1]", "door / size [trial 1]", "lamp / idx [trial 1]",
                             "door / idx [trial 2]", "door / size [trial 2]", "lamp / idx [trial 2]", "gates"]
    gates = {g.name: g for g in by_name["gates"]}
    assert list(gates) == ["adapter_errors [trial 1]", "eval_min_pass_rate [trial 1]",
                           "adapter_errors [trial 2]", "eval_min_pass_rate [trial 2]", "max_flaky_samples"]
    assert gates["adapter_errors [trial 1]"].is_passed and gates["max_flaky_samples"].is_passed
    assert gates["eval_min_pass_rate [trial 2]"].result[0].message == "77.8% pass rate (gate: >= 90.0%)"


def test_hostile_text_is_escaped_and_invalid_xml_characters_replaced(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp, {"door/idx/0.5": {"index": "<b>&\"]]>\x07\n"}})
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--junit-xml", "j.xml")
    assert code == 0, err
    validate(in_tmp / "j.xml")
    case = next(c for c in suites(in_tmp / "j.xml")["door / idx"] if c.name == "idx @ 0.500s")
    failure = case.result[0]
    assert 'observed: "<b>&\\"]]>\\u0007\\n"' in failure.text  # JSON-escaped in the body


def test_resume_writes_the_junit_file_given_to_the_original_run(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp, {"lamp/idx/1": "raise"})
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--junit-xml", "first.xml")
    assert code == 1
    checkpoint = next(line.split("--resume ", 1)[1].rstrip("`.") for line in out.splitlines()
                      if line.startswith("Resume with `"))
    (in_tmp / "first.xml").unlink()
    set_overrides(eval_dir, None)
    code, _out, err = run_cli("run", "--resume", checkpoint)
    assert code == 0, err
    validate(in_tmp / "first.xml")
    lamp = suites(in_tmp / "first.xml")["lamp / idx"]
    assert (lamp.tests, lamp.errors) == (4, 0)
    manifest = json.loads((Path(checkpoint) / "manifest.json").read_text())
    assert manifest["invocation"]["junit_xml"] == os.path.join(str(in_tmp), "first.xml")


def test_junit_is_independent_of_the_json_report(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--junit-xml", "j.xml", "--output-json", "r.json")
    assert code == 0, err
    report = read_json(in_tmp / "r.json")
    assert "baseline" not in report and "shard" not in report
    total = sum(s.tests for name, s in suites(in_tmp / "j.xml").items() if name != "gates")
    assert total == len(report["trials"][0]["results"])


def test_render_is_exact_and_pure() -> None:
    from glasskit_eval.reports.junit import JunitContext, render_junit
    from glasskit_eval.reports.locations import SampleLocation
    from glasskit_eval.results import ErrorKind, Gate, SampleResult, Status, TrialResult
    from glasskit_eval.summary import RunResult, RunSummary

    def result(index: int, status: Status, reason: str, **extra: object) -> SampleResult:
        return SampleResult(case="c", target="t", target_label=None, sample_index=index, timestamp_s=index / 4,
                            source="at", status=status, expected=True, field=None, compare_mode=None,
                            reason=reason, evaluation_duration_seconds=0.25 if status is not Status.IGNORED
                            else None, **extra)  # type: ignore[arg-type]

    results = (result(0, Status.PASSED, "matched", observed_value=True, frame_index=0),
               result(1, Status.ERROR, "adapter_error: x\x00y", error_kind=ErrorKind.ADAPTER),
               result(2, Status.IGNORED, "blurry <frame> \ud800"))
    trial = TrialResult(1, results, (Gate("adapter_errors", False, "1 adapter/comparison errors"),), 1.0, None)
    run = RunResult("/e", ("c",), 1, (trial,), (), 1.0)
    locations = {r.key: SampleLocation(Path("/w/e/cases/c.yaml"), 3) for r in results}
    text = render_junit(RunSummary.of(run), JunitContext(locations, "/w", "e", (("baseline.added", "0"),)))
    assert text == """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="glasskit_eval" tests="4" failures="1" errors="1" skipped="1" time="0.500">
  <testsuite name="c / t" tests="3" failures="0" errors="1" skipped="1" time="0.500" file="e/cases/c.yaml">
    <testcase name="t @ 0.000s" classname="c" file="e/cases/c.yaml" line="3" time="0.250" />
    <testcase name="t @ 0.250s" classname="c" file="e/cases/c.yaml" line="3" time="0.250">
      <error message="adapter_error: x\ufffdy" type="adapter_error">expected: true
observed: null
reason: adapter_error: x\ufffdy
review: python -m glasskit_eval review --eval-dir e --case c --target t --time 0.25
</error>
    </testcase>
    <testcase name="t @ 0.500s" classname="c" file="e/cases/c.yaml" line="3" time="0.000">
      <skipped message="blurry &lt;frame&gt; \ufffd" />
    </testcase>
  </testsuite>
  <testsuite name="gates" tests="1" failures="1" errors="0" skipped="0" time="0.000">
    <properties>
      <property name="baseline.added" value="0" />
      <property name="pass_rate_ci.low" value="0.094531" />
      <property name="pass_rate_ci.high" value="0.905469" />
      <property name="pass_rate_ci.level" value="0.95" />
      <property name="pass_rate_ci.effective_samples" value="2.00" />
      <property name="latency.p50_s" value="0.250000" />
      <property name="latency.p90_s" value="0.250000" />
      <property name="latency.p95_s" value="0.250000" />
      <property name="latency.max_s" value="0.250000" />
    </properties>
    <testcase name="adapter_errors" classname="gates" time="0.000">
      <failure message="1 adapter/comparison errors" type="gate">1 adapter/comparison errors
</failure>
    </testcase>
  </testsuite>
</testsuites>
"""


@pytest.mark.parametrize("kind", ["python", "command"])
def test_errors_carry_the_adapters_stack_trace(in_tmp: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    import shlex
    import sys

    from evalkit import ROOT

    eval_dir = ci_eval(in_tmp, {"door/size/0": "raise"})
    adapter = ["--adapter", f"{eval_dir / 'adapter.py'}:create_evaluator"]
    if kind == "command":
        monkeypatch.setenv("PYTHONPATH", str(ROOT))
        adapter = ["--adapter-command", shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                                                    f"{eval_dir / 'adapter.py'}:create_evaluator"])]
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, *adapter, "--keep-going", "--junit-xml", "j.xml")
    assert code == 1, err
    error = next(c for c in suites(in_tmp / "j.xml")["door / size"]).result[0]
    body = error.text
    head, _, trace = body.partition("\n\n")
    assert head.endswith("--target size --time 0")
    assert trace.startswith("Traceback (most recent call last):\n")
    assert f'File "{eval_dir / "adapter.py"}"' in trace
    assert trace.endswith("RuntimeError: boom: door/size/0\n")
    # The command adapter's own trace, not ours of reading its answer.
    if kind == "python":
        assert "glasskit_eval" not in trace  # the adapter's frames only: ours are cut


def test_junitparser_round_trip_keeps_every_suite_case_and_outcome(in_tmp: Path) -> None:
    eval_dir = ci_eval(in_tmp, {"door/size/0": "raise"})
    run_cli("run", "--eval-dir", eval_dir, "--keep-going", "--repeat", "2", "--junit-xml", "j.xml")

    def outline(path: Path) -> list[tuple[Any, ...]]:
        xml = junitparser.JUnitXml.fromfile(str(path))
        return [(s.name, s.tests, s.failures, s.errors, s.skipped,
                 [(c.name, c.classname, [(type(r).__name__, r.message, r.text) for r in c.result])
                  for c in s]) for s in xml]

    before = outline(in_tmp / "j.xml")
    xml = junitparser.JUnitXml.fromfile(str(in_tmp / "j.xml"))
    xml.write(str(in_tmp / "again.xml"))
    assert outline(in_tmp / "again.xml") == before
    assert len(before) == 7 and sum(len(s[5]) for s in before) == 2 * 10 + 2
    validate(in_tmp / "again.xml")


def test_testcase_names_sort_by_time_past_ten_seconds() -> None:
    from glasskit_eval.reports.junit import sample_name, time_width
    from glasskit_eval.results import SampleResult, Status

    def at(time: float) -> SampleResult:
        return SampleResult(case="c", target="t", target_label=None, sample_index=0, timestamp_s=time, source="at",
                            status=Status.PASSED, expected=1, field=None, compare_mode=None, reason="matched")

    results = [at(t) for t in (2.5, 10.0, 10.25, 125.0, 0.0)]
    names = [sample_name(r, time_width(results)) for r in results]
    assert names == ["t @ 002.500s", "t @ 010.000s", "t @ 010.250s", "t @ 125.000s", "t @ 000.000s"]
    assert sorted(names) == [names[4], names[0], names[1], names[2], names[3]]
