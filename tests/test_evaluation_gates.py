"""Quality gates and their precedence (glasskit_eval.evaluation.gates).

Names and messages follow what upstream reports; the scenario below is the one
recorded from the upstream tool (cases alpha and beta, config.yaml thresholds).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from glasskit_eval.cases.model import Thresholds
from glasskit_eval.evaluation.gates import CaseThresholds, GateOptions, evaluate_gates, flaky_gate
from glasskit_eval.results import Gate, SampleResult, Status

pytestmark = pytest.mark.frames


def result(case: str, target: str, status: Status, index: int = 0) -> SampleResult:
    return SampleResult(case=case, target=target, target_label=None, sample_index=index, timestamp_s=0.0,
                        source="at", status=status, expected=True, field=None, compare_mode=None, reason="")


def results(case: str, target: str, passed: int = 0, failed: int = 0, errors: int = 0,
            ignored: int = 0) -> list[SampleResult]:
    statuses = ([Status.PASSED] * passed + [Status.FAILED] * failed + [Status.ERROR] * errors
                + [Status.IGNORED] * ignored)
    return [result(case, target, status, i) for i, status in enumerate(statuses)]


def table(gates: Sequence[Gate]) -> list[tuple[str, bool, str]]:
    return [(g.name, g.passed, g.message) for g in gates]


# The upstream scenario: alpha door 2/4, alpha count 1/3, beta word 1/2 (9 evaluated, 5 failed).
UPSTREAM_RESULTS = results("alpha", "door", 2, 2) + results("alpha", "count", 1, 2) + results("beta", "word", 1, 1)
UPSTREAM_CONFIG = Thresholds(min_pass_rate=0.8, max_failures=10, per_target={"word": 1.0, "count": 0.5})
UPSTREAM_CASES = [
    CaseThresholds("alpha", Thresholds(min_pass_rate=0.9, max_failures=1, per_target={"door": 0.75})),
    CaseThresholds("beta", None),
]


def upstream(options: GateOptions) -> list[tuple[str, bool, str]]:
    return table(evaluate_gates(UPSTREAM_RESULTS, options=options, eval_thresholds=UPSTREAM_CONFIG,
                                cases=UPSTREAM_CASES))


def test_upstream_scenario_yaml_gates_only() -> None:
    assert upstream(GateOptions()) == [
        ("adapter_errors", True, "no adapter/comparison errors"),
        ("eval_min_pass_rate", False, "44.4% pass rate (gate: >= 80.0%)"),
        ("eval_max_failures", True, "5 failures (gate: <= 10)"),
        ("eval_word_min_pass_rate", False, "50.0% pass rate (gate: >= 100.0%)"),
        ("eval_count_min_pass_rate", False, "33.3% pass rate (gate: >= 50.0%)"),
        ("alpha_min_pass_rate", False, "42.9% pass rate (gate: >= 90.0%)"),
        ("alpha_max_failures", False, "alpha: 4 failures (gate: <= 1)"),
        ("alpha_door_min_pass_rate", False, "50.0% pass rate (gate: >= 75.0%)"),
    ]


def test_upstream_scenario_cli_min_pass_rate_overrides_and_drops_case_gates() -> None:
    assert upstream(GateOptions(min_pass_rate=0.4)) == [
        ("adapter_errors", True, "no adapter/comparison errors"),
        ("eval_min_pass_rate", True, "44.4% pass rate (gate: >= 40.0%)"),
        # The eval-level key the CLI did not override still applies.
        ("eval_max_failures", True, "5 failures (gate: <= 10)"),
        ("eval_word_min_pass_rate", False, "50.0% pass rate (gate: >= 100.0%)"),
        ("eval_count_min_pass_rate", False, "33.3% pass rate (gate: >= 50.0%)"),
    ]


def test_upstream_scenario_min_target_pass_rate_replaces_config_per_target() -> None:
    assert upstream(GateOptions(min_target_pass_rate=0.5)) == [
        ("adapter_errors", True, "no adapter/comparison errors"),
        ("eval_min_pass_rate", False, "44.4% pass rate (gate: >= 80.0%)"),
        ("eval_max_failures", True, "5 failures (gate: <= 10)"),
        ("all_targets_count_min_pass_rate", False, "33.3% pass rate (gate: >= 50.0%)"),
        ("all_targets_door_min_pass_rate", True, "50.0% pass rate (gate: >= 50.0%)"),
        ("all_targets_word_min_pass_rate", True, "50.0% pass rate (gate: >= 50.0%)"),
        # Case-level gates still apply with only --min-target-pass-rate.
        ("alpha_min_pass_rate", False, "42.9% pass rate (gate: >= 90.0%)"),
        ("alpha_max_failures", False, "alpha: 4 failures (gate: <= 1)"),
        ("alpha_door_min_pass_rate", False, "50.0% pass rate (gate: >= 75.0%)"),
    ]


def test_upstream_scenario_cli_max_failures_and_min_target_pass_rate() -> None:
    assert upstream(GateOptions(max_failures=5, min_target_pass_rate=0.3)) == [
        ("adapter_errors", True, "no adapter/comparison errors"),
        ("eval_min_pass_rate", False, "44.4% pass rate (gate: >= 80.0%)"),
        ("eval_max_failures", True, "5 failures (gate: <= 5)"),
        ("all_targets_count_min_pass_rate", True, "33.3% pass rate (gate: >= 30.0%)"),
        ("all_targets_door_min_pass_rate", True, "50.0% pass rate (gate: >= 30.0%)"),
        ("all_targets_word_min_pass_rate", True, "50.0% pass rate (gate: >= 30.0%)"),
    ]


def test_no_configured_gate_means_only_adapter_errors() -> None:
    gates = evaluate_gates(results("a", "t", 0, 5), options=GateOptions(), eval_thresholds=None,
                           cases=[CaseThresholds("a", None)])
    assert table(gates) == [("adapter_errors", True, "no adapter/comparison errors")]
    gates = evaluate_gates(results("a", "t", 0, 5), options=GateOptions(), eval_thresholds=Thresholds(),
                           cases=[CaseThresholds("a", Thresholds())])
    assert table(gates) == [("adapter_errors", True, "no adapter/comparison errors")]


def test_adapter_errors_come_first_and_fail_on_any_error() -> None:
    rs = results("a", "t", passed=3, errors=2, ignored=1)
    gates = evaluate_gates(rs, options=GateOptions(min_pass_rate=0.5), eval_thresholds=None, cases=[])
    assert table(gates) == [
        ("adapter_errors", False, "2 adapter/comparison errors"),
        ("eval_min_pass_rate", True, "60.0% pass rate (gate: >= 50.0%)"),
    ]
    one = evaluate_gates(results("a", "t", errors=1), options=GateOptions(), eval_thresholds=None, cases=[])
    assert table(one) == [("adapter_errors", False, "1 adapter/comparison errors")]


def test_errors_count_against_the_pass_rate_but_not_as_failures() -> None:
    rs = results("a", "t", passed=2, failed=1, errors=1)
    gates = evaluate_gates(rs, options=GateOptions(min_pass_rate=0.5, max_failures=1), eval_thresholds=None,
                           cases=[])
    assert table(gates)[1:] == [
        ("eval_min_pass_rate", True, "50.0% pass rate (gate: >= 50.0%)"),
        ("eval_max_failures", True, "1 failures (gate: <= 1)"),
    ]


def test_ignored_results_are_left_out_of_rates_and_failure_counts() -> None:
    rs = results("a", "t", passed=1, failed=1, ignored=8)
    gates = evaluate_gates(rs, options=GateOptions(min_pass_rate=0.5, max_failures=1), eval_thresholds=None,
                           cases=[CaseThresholds("a", Thresholds(min_pass_rate=0.5))])
    assert table(gates)[1:] == [
        ("eval_min_pass_rate", True, "50.0% pass rate (gate: >= 50.0%)"),
        ("eval_max_failures", True, "1 failures (gate: <= 1)"),
    ]


@pytest.mark.parametrize(("passed", "total", "minimum", "ok"), [
    (1, 2, 0.5, True),          # exactly 50% passes a 0.5 gate
    (3, 6, 0.5, True),
    (2, 5, 0.4, True),
    (7, 10, 0.7, True),
    (29, 100, 0.29, True),
    (1, 3, 1 / 3, True),
    (1, 3, 0.3333333333333333, True),
    (1, 3, 0.34, False),
    (9, 10, 0.95, False),
    (10, 10, 1.0, True),
    (0, 4, 0.0, True),
    (0, 4, 0.01, False),
])
def test_pass_rate_gates_use_greater_or_equal(passed: int, total: int, minimum: float, ok: bool) -> None:
    rs = results("a", "t", passed=passed, failed=total - passed)
    (gate,) = evaluate_gates(rs, options=GateOptions(min_pass_rate=minimum), eval_thresholds=None, cases=[])[1:]
    assert gate.passed is ok


@pytest.mark.parametrize(("failed", "maximum", "ok"), [(0, 0, True), (1, 0, False), (3, 3, True), (4, 3, False)])
def test_failure_gates_use_less_or_equal(failed: int, maximum: int, ok: bool) -> None:
    rs = results("a", "t", passed=2, failed=failed)
    (gate,) = evaluate_gates(rs, options=GateOptions(max_failures=maximum), eval_thresholds=None, cases=[])[1:]
    assert (gate.name, gate.passed, gate.message) == (
        "eval_max_failures", ok, f"{failed} failures (gate: <= {maximum})")


def test_cli_max_failures_alone_also_drops_case_gates() -> None:
    cases = [CaseThresholds("a", Thresholds(min_pass_rate=0.99, max_failures=0, per_target={"t": 0.99}))]
    gates = evaluate_gates(results("a", "t", 1, 1), options=GateOptions(max_failures=3),
                           eval_thresholds=Thresholds(min_pass_rate=0.2), cases=cases)
    assert [g.name for g in gates] == ["adapter_errors", "eval_min_pass_rate", "eval_max_failures"]
    assert gates[1].message == "50.0% pass rate (gate: >= 20.0%)"


def test_case_gates_in_case_order_with_their_own_results() -> None:
    rs = results("b", "x", 1, 0) + results("a", "x", 1, 1) + results("a", "y", 0, 2)
    cases = [
        CaseThresholds("a", Thresholds(min_pass_rate=0.2, max_failures=2, per_target={"y": 0.5, "x": 0.5})),
        CaseThresholds("b", Thresholds(max_failures=0)),
    ]
    gates = evaluate_gates(rs, options=GateOptions(), eval_thresholds=None, cases=cases)
    assert table(gates)[1:] == [
        ("a_min_pass_rate", True, "25.0% pass rate (gate: >= 20.0%)"),
        ("a_max_failures", False, "a: 3 failures (gate: <= 2)"),
        ("a_y_min_pass_rate", False, "0.0% pass rate (gate: >= 50.0%)"),
        ("a_x_min_pass_rate", True, "50.0% pass rate (gate: >= 50.0%)"),
        ("b_max_failures", True, "b: 0 failures (gate: <= 0)"),
    ]


def test_per_target_gates_skip_targets_outside_the_selection() -> None:
    # As after `--target door`: word and count have no results at all.
    rs = results("alpha", "door", 2, 2)
    gates = evaluate_gates(rs, options=GateOptions(), eval_thresholds=Thresholds(per_target={
        "word": 1.0, "door": 0.5, "count": 0.5}),
        cases=[CaseThresholds("alpha", Thresholds(per_target={"door": 0.5, "count": 0.9}))])
    assert [g.name for g in gates] == ["adapter_errors", "eval_door_min_pass_rate", "alpha_door_min_pass_rate"]


def test_min_target_pass_rate_gates_only_targets_with_evaluated_results() -> None:
    rs = results("a", "zeta", 1, 0) + results("a", "alpha", 0, 1) + results("a", "only_ignored", ignored=2)
    gates = evaluate_gates(rs, options=GateOptions(min_target_pass_rate=0.5),
                           eval_thresholds=Thresholds(per_target={"zeta": 1.0}), cases=[])
    assert table(gates)[1:] == [
        ("all_targets_alpha_min_pass_rate", False, "0.0% pass rate (gate: >= 50.0%)"),
        ("all_targets_zeta_min_pass_rate", True, "100.0% pass rate (gate: >= 50.0%)"),
    ]


def test_nothing_evaluated_is_a_zero_pass_rate_as_upstream_reports() -> None:
    # A target whose selected samples are all ignored is present, with nothing evaluated.
    rs = results("a", "z", ignored=1)
    gates = evaluate_gates(rs, options=GateOptions(), eval_thresholds=Thresholds(min_pass_rate=0.8, per_target={
        "z": 0.5}), cases=[CaseThresholds("a", Thresholds(min_pass_rate=0.9, max_failures=0, per_target={"z": 0.5}))])
    assert table(gates) == [
        ("adapter_errors", True, "no adapter/comparison errors"),
        ("eval_min_pass_rate", False, "0.0% pass rate (gate: >= 80.0%)"),
        ("eval_z_min_pass_rate", False, "0.0% pass rate (gate: >= 50.0%)"),
        ("a_min_pass_rate", False, "0.0% pass rate (gate: >= 90.0%)"),
        ("a_max_failures", True, "a: 0 failures (gate: <= 0)"),
        ("a_z_min_pass_rate", False, "0.0% pass rate (gate: >= 50.0%)"),
    ]
    zero = evaluate_gates([], options=GateOptions(min_pass_rate=0.0, max_failures=0), eval_thresholds=None,
                          cases=[])
    assert table(zero) == [
        ("adapter_errors", True, "no adapter/comparison errors"),
        ("eval_min_pass_rate", True, "0.0% pass rate (gate: >= 0.0%)"),
        ("eval_max_failures", True, "0 failures (gate: <= 0)"),
    ]


def test_percentages_have_one_decimal() -> None:
    rs = results("a", "t", passed=2, failed=1)
    (gate,) = evaluate_gates(rs, options=GateOptions(min_pass_rate=0.955), eval_thresholds=None, cases=[])[1:]
    assert gate.message == "66.7% pass rate (gate: >= 95.5%)"


def test_flaky_gate() -> None:
    assert flaky_gate(0, 0) == Gate("max_flaky_samples", True, "0 flaky samples (gate: <= 0)")
    assert flaky_gate(2, 0) == Gate("max_flaky_samples", False, "2 flaky samples (gate: <= 0)")
    assert flaky_gate(2, 2).passed


def test_gate_json_keys() -> None:
    (gate,) = evaluate_gates([], options=GateOptions(), eval_thresholds=None, cases=[])
    assert gate.to_json() == {"message": "no adapter/comparison errors", "name": "adapter_errors", "passed": True}


def test_latency_and_cost_gates() -> None:
    from glasskit_eval.evaluation.gates import cost_gate, latency_gate

    assert latency_gate(0.4, 0.5).passed and not latency_gate(0.6, 0.5).passed
    assert latency_gate(None, 0.5).passed
    assert cost_gate(1.0, 1.0).passed and not cost_gate(1.01, 1.0).passed
    assert cost_gate(None, 1.0).passed and "no cost" in cost_gate(None, 1.0).message


def test_a_per_target_gate_for_an_undeclared_target_fails_instead_of_vanishing() -> None:
    rs = results("alpha", "door", 2, 0)
    why = "no case declares target 'dor', named in config.yaml:4 (...)"
    gates = evaluate_gates(rs, options=GateOptions(), eval_thresholds=Thresholds(per_target={"dor": 0.5, "door": 0.5}),
                           cases=[], undeclared={"dor": why})
    assert table(gates)[1:] == [("eval_dor_min_pass_rate", False, why),
                                ("eval_door_min_pass_rate", True, "100.0% pass rate (gate: >= 50.0%)")]
    # --min-target-pass-rate replaces config.yaml's per_target gates, this one included.
    gates = evaluate_gates(rs, options=GateOptions(min_target_pass_rate=0.5),
                           eval_thresholds=Thresholds(per_target={"dor": 0.5}), cases=[], undeclared={"dor": why})
    assert [g.name for g in gates] == ["adapter_errors", "all_targets_door_min_pass_rate"]


def test_latency_and_cost_gate_messages_read_as_people_write_them() -> None:
    from glasskit_eval.evaluation.gates import cost_gate, latency_gate

    assert latency_gate(0.42, 0.3).message == "p95 latency 420 ms > 300 ms"
    assert latency_gate(1e-7, 2e-3).message == "p95 latency 0.1 µs <= 2 ms"
    assert latency_gate(1.5, 2).message == "p95 latency 1.5 s <= 2 s"
    assert cost_gate(0.03, 0.02).message == "cost 0.03 > 0.02"


def test_blind_gate_counts_the_control_passes_a_blind_arm_keeps() -> None:
    from dataclasses import replace

    from glasskit_eval.evaluation.gates import blind_gate
    from glasskit_eval.results import TrialResult

    control = [replace(r, arm="control") for r in results("c", "t", passed=4, failed=1)]
    # The blind arm passes samples 0 and 1 (control passes) and 4 (a control failure: not counted).
    blank = [replace(r, arm="blank", status=Status.PASSED if r.sample_index in (0, 1, 4) else Status.FAILED)
             for r in control]
    trials = [TrialResult(1, tuple(control + blank), (), 0.0, None)]
    gate = blind_gate(trials, "control", ["blank"], 0.5)
    assert (gate.name, gate.passed) == ("blind_pass_rate", True)
    assert gate.message.startswith("blank passes 2 of the 4 control passes (50.0%)")
    assert not blind_gate(trials, "control", ["blank"], 0.49).passed
    # A second trial counts its own passes (the same sample in another trial is another attempt).
    trials.append(TrialResult(2, tuple(control + [replace(r, status=Status.PASSED) for r in blank]), (), 0.0, None))
    assert blind_gate(trials, "control", ["blank"], 0.5).message.startswith("blank passes 6 of the 8 control")
    nothing = [TrialResult(1, tuple(replace(r, status=Status.FAILED) for r in control + blank), (), 0.0, None)]
    assert blind_gate(nothing, "control", ["blank"], 0.5).passed
