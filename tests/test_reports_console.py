"""The console's end-of-run failure table, its review command and the no-gate note."""

from __future__ import annotations

import io
import itertools
import shlex
from pathlib import Path

import pytest
from evalkit import make_eval, run_cli

from glasskit_eval.reports.console import (
    ConsoleListener,
    failure_lines,
    print_summary,
    review_command,
)
from glasskit_eval.results import Gate, SampleResult, Status, TrialResult
from glasskit_eval.summary import RunResult, RunSummary


def result(index: int, status: Status, *, case: str = "walk", traceback: str | None = None) -> SampleResult:
    return SampleResult(case=case, target="lights", target_label=None, sample_index=index,
                        timestamp_s=index / 2, source="at", status=status, expected=True, field=None,
                        compare_mode=None, reason="matched" if status is Status.PASSED else "expected true",
                        observed=status is Status.PASSED, observed_value=status is Status.PASSED,
                        frame_index=index * 5, traceback=traceback)


def summary_of(results: list[SampleResult], gates: tuple[Gate, ...] = (), eval_dir: str = "/x/eval",
               trials: int = 1) -> RunSummary:
    base = (Gate("adapter_errors", True, "no adapter/comparison errors"),)
    run = RunResult(eval_dir=eval_dir, cases=("walk",), repeat=trials,
                    trials=tuple(TrialResult(trial=t, results=tuple(results), gates=base + gates,
                                             duration_seconds=1.0, timing_mode=None)
                                 for t in range(1, trials + 1)),
                    gates=(), duration_seconds=1.0)
    return RunSummary.of(run)


def test_summary_lists_failures_in_run_order() -> None:
    s = summary_of([result(0, Status.PASSED), result(1, Status.FAILED), result(2, Status.ERROR)], trials=2)
    assert [(f.trial, f.result.sample_index) for f in s.failures] == [(1, 1), (1, 2), (2, 1), (2, 2)]


def test_failure_table_shows_up_to_20_and_points_to_the_report(tmp_path: Path) -> None:
    results = [result(i, Status.FAILED) for i in range(23)]
    lines = failure_lines(summary_of(results), report_path="out/report.json")
    text = "\n".join(lines)
    assert lines[0] == "Failures (first 20 of 23 failed or errored samples)"
    assert lines[1].split() == ["Case", "Target", "Time", "Frame", "Expected", "Observed", "Status", "Reason"]
    assert "walk  lights  0.5s      5  true      false     failed  expected true" in text
    assert "9.5s" in text and "10s" not in text  # the 20th is shown, the 21st is not
    assert "... and 3 more; see out/report.json" in lines
    assert lines[-3] == "Look at the first: python -m glasskit_eval review --eval-dir /x/eval --case walk " \
                        "--target lights --time 0 --report out/report.json"
    assert lines[-2:] == ["No gate is set, so failures do not fail this run;", "add --min-pass-rate or thresholds."]


def test_without_a_report_the_rest_is_one_option_away() -> None:
    lines = failure_lines(summary_of([result(i, Status.FAILED) for i in range(21)]), report_path=None)
    assert "... and 1 more; write them all with --output-json PATH" in lines


def test_no_gate_note_only_when_samples_failed_and_no_gate_is_set() -> None:
    gated = summary_of([result(0, Status.FAILED)], gates=(Gate("eval_min_pass_rate", False, "0%"),))
    assert not any(line.startswith("No gate") for line in failure_lines(gated, None))
    errors_only = summary_of([result(0, Status.ERROR)])
    assert not any(line.startswith("No gate") for line in failure_lines(errors_only, None))
    assert failure_lines(summary_of([result(0, Status.PASSED)]), None) == []


def test_repeated_runs_number_the_trial_of_each_attempt() -> None:
    lines = failure_lines(summary_of([result(0, Status.FAILED)], trials=2), None)
    assert lines[0] == "Failures (2 failed or errored attempts)"
    assert lines[1].split()[0] == "Trial"
    assert [line.split()[0] for line in lines[3:5]] == ["1", "2"]


def test_review_command_names_the_eval_dir_unless_it_is_the_default(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = result(3, Status.FAILED, case="my case")
    assert review_command(r, str(tmp_path / "eval")) == \
        "python -m glasskit_eval review --case 'my case' --target lights --time 1.5"
    assert review_command(r, str(tmp_path / "evals" / "a")).startswith(
        "python -m glasskit_eval review --eval-dir evals/a --case")
    assert review_command(r, str(tmp_path / "eval"), str(tmp_path / "out" / "r.json")).endswith(
        "--time 1.5 --report out/r.json")


def test_result_line_shows_the_last_frame_and_verbose_the_whole_traceback() -> None:
    tb = ('Traceback (most recent call last):\n  File "/e/adapter.py", line 7, in evaluate\n'
          '    return model(x)\n  File "/e/model.py", line 3, in model\n    raise ValueError("bad")\n'
          'ValueError: bad\n')
    r = result(0, Status.ERROR, traceback=tb)
    out = io.StringIO()
    quiet = ConsoleListener(out, err=io.StringIO(), live=False)
    quiet.sample_finished(r, 1, 1)
    assert out.getvalue().rstrip().endswith("reason=expected true (at /e/model.py:3 in model)")
    out = io.StringIO()
    ConsoleListener(out, verbose=True, err=io.StringIO(), live=False).sample_finished(r, 1, 1)
    assert "      | ValueError: bad" in out.getvalue().splitlines()  # an adapter's lines never start ours


def test_print_summary_ends_with_the_failure_table() -> None:
    out = io.StringIO()
    print_summary(summary_of([result(0, Status.FAILED)]), out, resume_hint="Resume with `x`.")
    text = out.getvalue()
    assert text.index("By target") < text.index("Failures (1 failed or errored samples)") < \
        text.index("Resume with `x`.")


def test_a_failing_run_prints_the_table_and_a_review_command_that_parses(tmp_path: Path) -> None:
    adapter = ("def create_evaluator(config):\n    return E()\n\n"
               "class E:\n    def evaluate(self, sample, target):\n        return False\n")
    eval_dir = make_eval(tmp_path, {"walk": "video: cfr_h264.mp4\ntargets:\n  lights:\n    samples:\n"
                                             "    - at: [0.5]\n      expect: true\n"}, adapter)
    code, out, err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0, err  # no gate
    assert "Failures (1 failed or errored samples)" in out
    assert "No gate is set" in out
    command = next(line for line in out.splitlines() if line.startswith("Look at the first: "))
    words = shlex.split(command.removeprefix("Look at the first: "))
    assert words[:4] == ["python", "-m", "glasskit_eval", "review"]
    from glasskit_eval.cli import build_parser

    args = build_parser("review").parse_args(words[3:])
    assert (args.case, args.target, float(args.time)) == ("walk", "lights", 0.5)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "1")
    assert code == 1 and "No gate is set" not in out and "Failures (1" in out
    # With a report, the command also overlays it; the review server really opens on that sample.
    report = tmp_path / "report.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report)
    command = next(line for line in out.splitlines() if line.startswith("Look at the first: "))
    words = shlex.split(command.removeprefix("Look at the first: "))
    assert words[-2:] == ["--report", str(report)]
    from glasskit_eval.commands.review import ReviewOptions, start_review

    args = build_parser("review").parse_args(words[3:])
    server = start_review(ReviewOptions(eval_dir=args.eval_dir, case=args.case, target=args.target,
                                        time=args.time, port=0, report=args.report))
    try:
        assert server.state.initial["case"] == "walk" and server.state.initial["target"] == "lights"
        assert server.state.markers  # the report's outcomes are overlaid
    finally:
        server.server_close()


def test_an_errors_reason_is_whole_and_wrapped_in_the_table() -> None:
    from dataclasses import replace

    r = replace(result(0, Status.ERROR), reason="adapter_error: adapter failed for walk/lights sample 0 at "
                "0s: RuntimeError: model server returned 503")
    lines = failure_lines(summary_of([r]), None)
    # The row already says which sample: the reason drops that and keeps all the rest, wrapped.
    start = lines[1].index("Reason")
    continued = itertools.takewhile(lambda line: not line[:start].strip(), lines[4:])
    reason = " ".join(line[start:].strip() for line in [lines[3], *continued])
    assert reason == "adapter_error: RuntimeError: model server returned 503"
    assert all(len(line) <= 80 for line in lines[:5])


def test_a_run_failed_by_adapter_errors_does_not_say_no_gate_is_set(tmp_path: Path) -> None:
    adapter = ("def create_evaluator(config):\n    return E()\n\n"
               "class E:\n    def evaluate(self, sample, target):\n"
               "        if sample.timestamp_s > 1:\n            raise ValueError('down')\n        return False\n")
    eval_dir = make_eval(tmp_path, {"walk": "video: cfr_h264.mp4\ntargets:\n  lights:\n    samples:\n"
                                             "    - at: [0.5, 1.5]\n      expect: true\n"}, adapter)
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    assert code == 1, out + err
    assert "No gate is set" not in out
    assert "Only the adapter-error gate is set, so failed samples do not fail this run;" in out
    assert out.rstrip("\n").splitlines()[-1].endswith("; gates: adapter_errors")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_prose_wraps_to_its_width_and_a_pipe_gets_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval.reports import progress
    from glasskit_eval.reports.console import fit_terminal

    monkeypatch.setattr(progress, "_columns", lambda stream: 80)
    monkeypatch.delenv("TERM", raising=False)
    line = ("    FAILED walk/lights @0.5s frame=12 expected=true observed=false reason=expected true, observed false "
            "(the lights were off)")
    wrapped = fit_terminal(line, _Terminal()).splitlines()
    assert len(wrapped) == 2 and all(len(x) <= 80 for x in wrapped)
    assert wrapped[1].startswith("      ") and " ".join(x.strip() for x in wrapped) == line.strip()
    assert fit_terminal(line, io.StringIO()) == line
    out = _Terminal()
    print_summary(summary_of([result(i, Status.FAILED) for i in range(3)]), out)
    assert max(len(x) for x in out.getvalue().splitlines() if not x.startswith("Look at the first: ")) <= 80
