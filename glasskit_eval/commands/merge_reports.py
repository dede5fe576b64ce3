"""The ``merge-reports`` command: shard reports in, one run's console summary and reports out."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from ..arms.compare import compare_arms
from ..reports.arms_table import print_arms
from ..reports.baseline import BaselineDiff, diff_against, load_report
from ..reports.console import print_end, print_summary
from ..reports.json_report import build_report, write_report
from ..reports.labels import print_labels, review_suspects_command
from ..summary import RunSummary
from . import ci_outputs as ci
from .arm_baselines import arm_baselines
from .labelling import merged_label_check
from .merging import merge_reports
from .requests import Comparison


def execute_merge_reports(paths: Sequence[str], out: TextIO, *, output_json: str | None, junit_xml: str | None,
                          annotations: str = "auto", baseline: str | None = None, comparison: Comparison,
                          env: Mapping[str, str] | None = None) -> bool:
    """Merge, report and gate; True when every gate passed. Bad shards raise UsageError."""
    env = os.environ if env is None else env
    merged = merge_reports([(path, load_report(Path(path))) for path in paths])
    result = merged.result
    found: BaselineDiff | None = None
    arm_diffs = None
    if baseline is not None and merged.arms is not None:
        arm_diffs = arm_baselines(Path(baseline), baseline, [r for t in result.trials for r in t.results],
                                  merged.arms.names, merged.arms.control, comparison,
                                  [s for t in result.trials for s in t.streams])
        found = arm_diffs.main
        gated = [n for n in merged.arms.names if merged.arms.gated(n)]
        result = replace(result, gates=(*result.gates, *arm_diffs.gates(comparison, gated)))
    elif baseline is not None:
        found = diff_against(Path(baseline), [r for t in result.trials for r in t.results], label=baseline,
                             streams=[s for t in result.trials for s in t.streams],
                             alpha=comparison.alpha, confidence=comparison.confidence)
        result = replace(result, gates=(*result.gates, *ci.baseline_gates(found, comparison)))
    summary = RunSummary.of(result, confidence=comparison.confidence, alpha=comparison.alpha,
                            control=merged.arms.control if merged.arms is not None else None)
    print(f"Merged {len(paths)} shard reports", file=out)
    print_summary(summary, out)
    arms = None
    if merged.arms is not None:
        # The comparisons of the whole run, from every shard's results (no shard saw them all).
        arms = compare_arms([t.results for t in result.trials], merged.arms.names, merged.arms.control,
                            merged.arms.specs, alpha=comparison.alpha, confidence=comparison.confidence)
        print_arms(arms, out)
    if arm_diffs is not None:
        arm_diffs.print(out)
        if arms is not None:
            arms = replace(arms, baselines=arm_diffs.to_json())
    else:
        ci.print_baseline(found, out)

    labels = merged_label_check(result, merged.arms.specs if merged.arms is not None else None)
    print_labels(labels, out, review_suspects_command(result.eval_dir, output_json))
    written = []
    if output_json:
        write_report(Path(output_json),
                     build_report(summary, baseline=found.to_json() if found is not None else None, arms=arms,
                                  labels=labels))
        written.append(ci.display_path(output_json))
    root = Path(result.eval_dir)
    if junit_xml:
        ci.write_junit(Path(junit_xml), summary, merged.locations, root, found)
        written.append(ci.display_path(junit_xml))
    if ci.annotations_on(annotations, env):
        written += ci.github_outputs(summary, merged.locations, root, found, out, env)
    print_end(summary, written, out)
    return summary.success
