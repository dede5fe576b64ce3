"""The label check of a finished run: which results vote, and each sample's comparison with its tolerance.

Computed once after every trial is done, from the run's results, and handed to every reporter.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..labels.consensus import check_labels, compare_from, default_compare

if TYPE_CHECKING:
    from ..arms.plan import ArmPlan
    from ..labels.consensus import CompareOf, LabelCheck
    from ..plan.planning import Plan
    from ..summary import RunResult


def run_label_check(plan: Plan, arms: ArmPlan | None, result: RunResult) -> LabelCheck | None:
    """The check for a run with repeats or arms; None for a plain run, whose report keeps upstream's keys."""
    # An arm that perturbs its frames fails on purpose: its votes say nothing about the label.
    abstaining = [a.name for a in arms.arms if a.perturb] if arms is not None else []
    configs = {(c.case.name, s.target.id, s.sample_index): s.compare for c in plan.cases for s in c.samples
               if s.compare is not None}
    return _check(result, arms is not None, abstaining, compare_from(configs))


def merged_label_check(result: RunResult, specs: Mapping[str, Mapping[str, Any]] | None) -> LabelCheck | None:
    """The check of shards merged (``merge-reports``, ``report``): arms as the reports describe them.

    No plan here: votes are compared by their recorded mode at tolerance 0 (a numeric target's
    close values then count as different values).
    """
    abstaining = [name for name, spec in (specs or {}).items() if spec.get("perturb")]
    return _check(result, specs is not None, abstaining, None)


def _check(result: RunResult, with_arms: bool, abstaining: Collection[str], compare_of: CompareOf | None
           ) -> LabelCheck | None:
    results = [r for t in result.trials for r in t.results]
    # A plain run, or stream targets alone (no sample results): nothing to say about labels either way.
    if (result.repeat < 2 and not with_arms) or not results:
        return None

    return check_labels(results, abstaining_arms=abstaining, compare_of=compare_of or default_compare)
