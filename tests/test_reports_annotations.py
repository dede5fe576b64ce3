"""GitHub Actions annotations and job summary: byte for byte on a fixture eval, escaping, the cap."""

from __future__ import annotations

from pathlib import Path

import pytest
from cikit import ci_eval
from evalkit import run_cli

from glasskit_eval.reports.annotations import (
    MAX_ANNOTATIONS,
    escape_data,
    escape_property,
    github_annotations,
    step_summary,
    workflow_command,
)
from glasskit_eval.reports.locations import SampleLocation
from glasskit_eval.results import SampleResult, Status, TrialResult
from glasskit_eval.summary import RunResult, RunSummary


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
    return tmp_path


def commands(out: str) -> list[str]:
    """The workflow commands that annotate (not the log groups the summary folds into)."""
    return [line for line in out.splitlines() if line.startswith("::")
            and not line.startswith(("::group::", "::endgroup::"))]


EXPECTED_ANNOTATIONS = [
    "::error title=gate adapter_errors failed::1 adapter/comparison errors",
    "::error file=eval/cases/door.yaml,line=7,title=door / idx @ 1s failed::expected 5, observed 10%0A"
    "expected: 5%0Aobserved: 10%0Aframe: 10%0A"
    "review: python -m glasskit_eval review --eval-dir eval --case door --target idx --time 1",
    "::error file=eval/cases/door.yaml,line=10,title=door / idx @ 1.7s failed::expected 15, observed 17%0A"
    "expected: 15%0Aobserved: 17%0Aframe: 17%0A"
    "review: python -m glasskit_eval review --eval-dir eval --case door --target idx --time 1.7",
    "::error file=eval/cases/door.yaml,line=16,title=door / size @ 0s error::adapter_error: adapter failed "
    "for door/size sample 5 at 0.0s: RuntimeError: boom: door/size/0%0Aexpected: [128,72]%0Aobserved: null%0A"
    "frame: 0%0Areview: python -m glasskit_eval review --eval-dir eval --case door --target size --time 0",
    "::error file=eval/cases/lamp.yaml,line=5,title=lamp / idx @ 1s failed::expected a number, observed "
    "\"50%25\\r\\n|`x`\"%0Aexpected: 0%0Aobserved: \"50%25\\r\\n|`x`\"%0Aframe: 10%0A"
    "review: python -m glasskit_eval review --eval-dir eval --case lamp --target idx --time 1",
]

EXPECTED_SUMMARY = """\
## glasskit_eval: failed

2 cases: 9 evaluated, 5 passed, 3 failed, 1 errors, 1 ignored; pass rate 55.6% (95% CI 26.7-81.1%; 9 effective of 9 samples)

### Gates

| Scope | Gate | Result | Detail |
|---|---|---|---|
| Run | `adapter_errors` | ❌ failed | 1 adapter/comparison errors |

### By target

| Target | Pass rate | Passed | Failed | Errors | Ignored |
|---|---|---|---|---|---|
| `Index (idx)` | 62.5% | 5 | 3 | 0 | 1 |
| `size` | 0.0% | 0 | 0 | 1 | 0 |

### Failures

| Case | Target | Time | Status | Expected | Observed | Reason |
|---|---|---|---|---|---|---|
| `door` | `idx` | 1s | failed | `5` | `10` | `expected 5, observed 10` |
| `door` | `idx` | 1.7s | failed | `15` | `17` | `expected 15, observed 17` |
| `door` | `size` | 0s | error | `[128,72]` | `null` | `adapter_error: adapter failed for door/size sample 5 at 0.0s: RuntimeError: boom: door/size/0` |
| `lamp` | `idx` | 1s | failed | `0` | ``"50%\\r\\n\\|`x`"`` | ``expected a number, observed "50%\\r\\n\\|`x`"`` |

"""


def test_annotations_and_step_summary_byte_for_byte(github: Path) -> None:
    eval_dir = ci_eval(github, {"door/size/0": "raise", "lamp/idx/1": {"index": "50%\r\n|`x`"}})
    code, out, err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    assert code == 1, err
    assert commands(out) == EXPECTED_ANNOTATIONS
    assert (github / "step-summary.md").read_text(encoding="utf-8") == EXPECTED_SUMMARY
    # A second step appends its own summary.
    code, _out, _err = run_cli("run", "--eval-dir", eval_dir, "--keep-going")
    assert (github / "step-summary.md").read_text(encoding="utf-8") == EXPECTED_SUMMARY * 2


def test_a_failed_gate_is_annotated_where_it_is_set(github: Path) -> None:
    eval_dir = ci_eval(github)
    (eval_dir / "config.yaml").write_text("# gates\nthresholds:\n  min_pass_rate: 0.99\n  per_target:\n"
                                          "    idx:\n      min_pass_rate: 0.95\n")
    code, out, _err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 1
    gates = [c for c in commands(out) if "title=gate " in c]
    assert [g.split("::")[1] for g in gates] == [
        "error file=eval/config.yaml,line=2,title=gate eval_min_pass_rate failed",
        "error file=eval/config.yaml,line=5,title=gate eval_idx_min_pass_rate failed"]
    assert gates[0].endswith("::77.8%25 pass rate (gate: >= 99.0%25)")
    # The command line's gates replace config.yaml's: they are set in no file.
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--min-pass-rate", "0.99", "--max-p95-latency", "1e-9")
    gates = [c for c in commands(out) if "title=gate " in c]
    assert gates[0] == "::error title=gate eval_min_pass_rate failed::77.8%25 pass rate (gate: >= 99.0%25)"
    assert gates[-1].startswith("::error title=gate max_p95_latency failed::p95 latency ")
    assert gates[-1].endswith(" > 0.001 µs")


def test_case_gates_point_at_the_case_files_thresholds(github: Path) -> None:
    eval_dir = ci_eval(github)
    door = eval_dir / "cases" / "door.yaml"
    door.write_text(door.read_text() + "thresholds:\n  max_failures: 0\n")
    code, out, _err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 1
    line = door.read_text().splitlines().index("thresholds:") + 1
    assert [c for c in commands(out) if "title=gate " in c] == [
        f"::error file=eval/cases/door.yaml,line={line},title=gate door_max_failures failed::"
        "door: 2 failures (gate: <= 0)"]


def test_the_job_summary_links_the_html_report(github: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/repo")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    eval_dir = ci_eval(github)
    assert run_cli("run", "--eval-dir", eval_dir, "--html", "out/report.html")[0] == 0
    text = (github / "step-summary.md").read_text(encoding="utf-8")
    assert ("HTML report: `out/report.html`; [the run's artifacts]"
            "(https://github.example/org/repo/actions/runs/42#artifacts) hold it once uploaded.") in text


def test_a_shard_does_not_say_no_gate_is_set(github: Path) -> None:
    eval_dir = ci_eval(github)
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--shard", "1/1", "--output-json", "s.json",
                              "--annotations", "none")
    assert code == 0 and "failed" in out
    assert "No gate is set" not in out and "gates are applied when `merge-reports`" in out
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--annotations", "none")
    assert "No gate is set" in out


def test_paths_are_relative_to_the_workspace(github: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = ci_eval(github)
    monkeypatch.setenv("GITHUB_WORKSPACE", str(github.parent))
    code, out, _err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0
    assert [c.split(",")[0] for c in commands(out)] == [f"::error file={github.name}/eval/cases/door.yaml"] * 2


def test_none_turns_them_off_and_auto_needs_github_actions(github: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    eval_dir = ci_eval(github)
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--annotations", "none")
    assert code == 0 and not commands(out)
    assert not (github / "step-summary.md").exists()
    monkeypatch.delenv("GITHUB_ACTIONS")
    code, out, _err = run_cli("run", "--eval-dir", eval_dir)
    assert code == 0 and not commands(out)
    assert not (github / "step-summary.md").exists()
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    code, out, _err = run_cli("run", "--eval-dir", eval_dir, "--annotations", "github")
    assert len(commands(out)) == 2


def test_escaping_follows_the_workflow_command_rules() -> None:
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert workflow_command("error", "m::x", file="a,b.yaml", line="3", title=None) == \
        "::error file=a%2Cb.yaml,line=3::m::x"
    assert workflow_command("error", "plain") == "::error::plain"
    # Lone surrogates (an adapter may return them) cannot be written as UTF-8.
    assert escape_data("a\ud800b") == escape_property("a\ud800b") == "a\ufffdb"


def _failed(index: int) -> SampleResult:
    return SampleResult(case="c", target="t", target_label=None, sample_index=index, timestamp_s=index / 10,
                        source="at", status=Status.FAILED, expected=1, field=None, compare_mode=None,
                        reason="no", observed=2, observed_value=2)


def test_at_most_fifty_annotations_then_one_summary_annotation() -> None:
    results = tuple(_failed(i) for i in range(MAX_ANNOTATIONS + 7))
    run = RunResult("e", ("c",), 1, (TrialResult(1, results, (), 1.0, None),), (), 1.0)
    locations = {r.key: SampleLocation(Path("/w/e/cases/c.yaml"), 4) for r in results}
    lines = github_annotations(RunSummary.of(run), locations, workspace="/w", eval_dir="e")
    assert len(lines) == MAX_ANNOTATIONS + 1
    assert lines[0].startswith("::error file=e/cases/c.yaml,line=4,title=c / t @ 0s failed::no%0A")
    assert lines[-1] == ("::error title=glasskit_eval%3A 7 more failing samples::7 more failed or errored "
                         "samples are not annotated; see the job summary or the JUnit report for all of them")
    text = step_summary(RunSummary.of(run))
    assert text.count("| `c` | `t` |") == 50 and "… and 7 more failing samples." in text


def test_the_job_summary_has_a_streams_section_with_each_miss_and_false_alarm() -> None:
    from test_reports_streams import FOUR, HITS, stream
    from test_reports_streams import summary as streams_summary

    text = step_summary(streams_summary(stream(FOUR, HITS)))
    assert text.startswith("## glasskit_eval: not gated\n\n1 cases: 1 of 4 events missed, 1 false alarm in 1 stream\n")
    assert "### By target" not in text  # no samples: no empty table
    assert ("### Streams\n\n| Stream | Detected | Recall | Repeats | False alarms | Latency p50/p95 | Frames |\n"
            "|---|---|---|---|---|---|---|\n| `room/lights` | 3/4 | 75.0% | 0 | 1 (2.31/min) | 0/100ms | 750 |\n") in text
    assert ("| Stream | Time | Finding | Detail |\n|---|---|---|---|\n"
            '| `room/lights` | 17s | false alarm | `"on"` |\n'
            '| `room/lights` | 27s | missed event | `no "on" in [27, 28]s` |\n') in text
