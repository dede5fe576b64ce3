"""The label check of a finished run: which results vote, and each sample's comparison with its tolerance.

Computed once after every trial is done, from the run's results, and handed to every reporter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..evaluation.fanout import ArmPlan
    from ..labels.consensus import LabelCheck
    from ..plan.planning import Plan
    from ..summary import RunResult


def run_label_check(plan: Plan, arms: ArmPlan | None, result: RunResult) -> LabelCheck | None:
    """The check for a run with repeats or arms; None for a plain run, whose report keeps upstream's keys."""
    if result.repeat < 2 and arms is None:
        return None
    from ..labels.consensus import check_labels, compare_from

    # An arm that perturbs its frames fails on purpose: its votes say nothing about the label.
    abstaining = [a.name for a in arms.arms if a.perturb] if arms is not None else []
    configs = {(c.case.name, s.target.id, s.sample_index): s.compare for c in plan.cases for s in c.samples
               if s.compare is not None}
    return check_labels((r for t in result.trials for r in t.results), abstaining_arms=abstaining,
                        compare_of=compare_from(configs))


def merged_label_check(result: RunResult, specs: Mapping[str, Mapping[str, Any]] | None) -> LabelCheck | None:
    """The check of shards merged (``merge-reports``): arms as the shards' reports describe them.

    No plan here: votes are compared by their recorded mode at tolerance 0 (a numeric target's
    close values then count as different values).
    """
    if result.repeat < 2 and specs is None:
        return None
    from ..labels.consensus import check_labels

    abstaining = [name for name, spec in (specs or {}).items() if spec.get("perturb")]
    return check_labels((r for t in result.trials for r in t.results), abstaining_arms=abstaining)
