"""What ``run --early-stop`` decided, as the console shows it (glasskit_eval.reports.early_stop).

The decisions are frozen data (``results.GateDecision``); their text is the reporter's, and the
gate an early decision stands in for carries the same text as its message.
"""

from __future__ import annotations

import io

from glasskit_eval.evaluation.gates import decided_gates
from glasskit_eval.reports.early_stop import decided_lines, decision_line, print_early_stop
from glasskit_eval.results import EarlyStop, Gate, GateDecision, TrialResult
from glasskit_eval.summary import RunResult, RunSummary

DECISIONS = (
    GateDecision("eval_min_pass_rate", "pass", 0.931, 0.99, 0.9, 212, 2400, True),
    GateDecision("other_min_pass_rate", "fail", 0.41, 0.873, 0.9, 1500, 2400, True),
    GateDecision("one_max_failures", "fail", 4, 40, 3, 800, 2400, True),
    GateDecision("eval_b_min_pass_rate", "pass", 0.95, 0.95, 0.9, 100, 100, False),
)


def summary(repeat: int) -> RunSummary:
    record = EarlyStop(800, 2400, 0, 0.5, 0.1, DECISIONS)
    trials = tuple(TrialResult(n, (), (), 1.0, None, early_stop=record) for n in range(1, repeat + 1))
    return RunSummary.of(RunResult("evals", ("one",), repeat, trials, (), 1.0))


def test_a_decision_reads_as_its_verdict_threshold_progress_and_bound() -> None:
    # A pass quotes the low bound, a fail the high one; the level is the record's (here 90%).
    assert decision_line(DECISIONS[0], 0.1) == ("Decided early: PASS eval_min_pass_rate >= 90% after 212 of 2,400 "
                                                "samples (90% anytime-valid bound 93.1%)")
    assert decision_line(DECISIONS[1], 0.05) == ("Decided early: FAIL other_min_pass_rate >= 90% after 1,500 of "
                                                 "2,400 samples (95% anytime-valid bound 87.3%)")
    assert decision_line(DECISIONS[2], 0.05) == ("Decided early: FAIL one_max_failures <= 3 after 800 of 2,400 "
                                                 "samples (4 failures seen)")


def test_the_console_lists_only_early_decisions_per_trial_and_the_calls_saved() -> None:
    out = io.StringIO()
    print_early_stop(summary(1), out)
    assert out.getvalue() == (
        "\n"
        "Decided early: PASS eval_min_pass_rate >= 90% after 212 of 2,400 samples (90% anytime-valid bound 93.1%)\n"
        "Decided early: FAIL other_min_pass_rate >= 90% after 1,500 of 2,400 samples (90% anytime-valid bound "
        "87.3%)\n"
        "Decided early: FAIL one_max_failures <= 3 after 800 of 2,400 samples (4 failures seen)\n"
        "Early stop: 1,600 of 2,400 adapter calls saved (67%)\n")
    lines = decided_lines(summary(2))
    assert len(lines) == 6 and lines[0].startswith("[1/2] Decided early: PASS") and lines[3].startswith("[2/2] ")


def test_a_decided_gate_carries_the_console_line_as_its_message() -> None:
    record = EarlyStop(800, 2400, 0, 0.5, 0.1, DECISIONS)
    gates = [Gate("eval_min_pass_rate", False, "88%"), Gate("one_max_failures", True, "2 failures"),
             Gate("eval_b_min_pass_rate", True, "95%")]
    decided = decided_gates(gates, record)
    assert [g.message for g in decided] == [decision_line(DECISIONS[0], 0.1), decision_line(DECISIONS[2], 0.1),
                                            "95%"]
