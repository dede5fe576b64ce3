"""The run's CI outputs: JUnit XML, GitHub annotations and job summary, baseline, shard marker.

Rendering is in ``reports/`` (pure); this module decides what applies to a run and does the I/O.
A shard's report carries everything ``merge-reports`` needs to recompute gates offline (options,
thresholds, the whole selection with its case-file lines), so merging needs no eval directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..cases.model import STREAM_GATE_NAMES, Thresholds
from ..errors import OutputError
from ..evaluation.gates import baseline_gate, baseline_latency_gate
from ..plan.planning import Plan, undeclared_gate_targets
from ..reports.annotations import github_annotations, step_summary
from ..reports.baseline import BaselineDiff, diff_against, format_diff
from ..reports.junit import JunitContext, render_junit
from ..reports.locations import Locations, SampleLocation, relative_path, sample_locations
from ..results import Gate
from ..summary import RunResult, RunSummary
from ..support.fsio import write_text_atomic
from ..support.outside import write_command
from .requests import Comparison, Gates, RunRequest, Selection

if TYPE_CHECKING:
    from ..arms.plan import ArmPlan

#: Options every shard of one matrix must share (they select samples or gate them): every gate
#: the command line sets travels, so ``merge-reports`` applies it (a new gate needs no line here).
SHARED_OPTIONS = ("case", "targets", *(f.name for f in fields(Selection)), "repeat", "pace",
                  *(f.name for f in fields(Gates)))


def compare_baseline(request: RunRequest, result: RunResult) -> BaselineDiff | None:
    """The run against ``--baseline`` (none for a shard: ``merge-reports`` compares the whole run)."""
    if request.ci.shard is not None or request.ci.baseline is None:
        return None
    return diff_against(Path(request.ci.baseline), [r for t in result.trials for r in t.results],
                        label=display_path(request.ci.baseline), alpha=request.comparison.alpha, confidence=request.comparison.confidence,
                        streams=[s for t in result.trials for s in t.streams])


def baseline_gates(found: BaselineDiff, comparison: Comparison) -> list[Gate]:
    """The gates ``--fail-on-regression`` and ``--fail-on-latency-regression`` add."""
    gates = [baseline_gate(found, comparison.fail_on_regression)] if comparison.fail_on_regression else []
    if comparison.fail_on_latency_regression_s is not None:
        gates.append(baseline_latency_gate(found, comparison.fail_on_latency_regression_s))
    return gates


def display_path(path: str) -> str:
    """``path`` relative to the cwd when it is below it (reports stay short and portable)."""
    text = relative_path(Path(path), Path.cwd())
    return path if text.startswith("../") or text == ".." else text


def print_notes(request: RunRequest, found: BaselineDiff | None, out: TextIO) -> None:
    """After the summary: the shard this was, or the baseline comparison."""
    if request.ci.shard is not None:
        print(file=out)
        print(f"Shard {request.ci.shard}: gates are applied when `merge-reports` merges the shards' reports",
              file=out)
    print_baseline(found, out)


def print_baseline(found: BaselineDiff | None, out: TextIO) -> None:
    if found is not None:
        print(file=out)
        print(format_diff(found), file=out)


def thresholds_json(t: Thresholds | None) -> dict[str, Any] | None:
    if t is None:
        return None
    streams = {target: {name: getattr(gates, name) for name in STREAM_GATE_NAMES}
               for target, gates in (t.stream_gates or {}).items()}
    # The report's keys are sorted; the per-target gates come in the file's order, so it travels too.
    return {"max_failures": t.max_failures, "min_pass_rate": t.min_pass_rate,
            "per_target": dict(t.per_target) if t.per_target else None,
            "per_target_order": list(t.per_target) if t.per_target else None, "stream_gates": streams or None,
            "max_p95_latency_s": t.max_p95_latency_s, "max_cost": t.max_cost}


def eval_fingerprint(fingerprints: Mapping[str, Any]) -> str:
    """One digest of the checkpoint's input fingerprints that is the same on every machine.

    Files are named relative to the eval directory, but a cloud video lives in a per-user cache
    whose path differs between CI runners, so videos count by content only.
    """
    videos = sorted(json.dumps(v, sort_keys=True) for v in (fingerprints.get("videos") or {}).values())
    stable = {"files": fingerprints.get("files") or {}, "videos": videos}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def shard_block(request: RunRequest, full: Plan, fingerprints: Mapping[str, Any],
                arms: ArmPlan | None = None) -> dict[str, Any]:
    assert request.ci.shard is not None
    index, _, total = request.ci.shard.partition("/")
    options = request.to_json()
    root = full.eval_dir.root
    locations = sample_locations(c.case for c in full.cases)
    selection = [[c.case.name, s.target.id, s.sample_index, locations[(c.case.name, s.target.id,
                                                                       s.sample_index)].line]
                 for c in full.cases for s in c.samples]
    return {
        "case_files": {c.case.name: relative_path(c.case.path, root) for c in full.cases},
        "cases": [c.case.name for c in full.cases],
        "eval_fingerprint": eval_fingerprint(fingerprints),
        "index": int(index),
        "options": {name: options[name] for name in SHARED_OPTIONS},
        "selection": selection,
        # Each (case, stream target) runs whole in one shard.
        "streams": [[c.case.name, t.id] for c in full.cases for t in c.streams],
        "thresholds": {"cases": [{"case": c.case.name, "thresholds": thresholds_json(c.case.thresholds)}
                                 for c in full.cases],
                       "eval": thresholds_json(full.eval_dir.config.thresholds)},
        "total": int(total),
        # The failing gates of config.yaml's per_target targets no selected case declares, as the
        # unsharded run makes them (their message names a config.yaml line merging cannot read).
        "undeclared": undeclared_gate_targets(full, request.filters()),
    } | ({"arms": arms_block(arms)} if arms is not None else {})


def arms_block(plan: ArmPlan) -> dict[str, Any]:
    """What ``merge-reports`` needs to recompute an arms run's per-arm gates and comparisons."""
    return {"names": list(plan.names), "control": plan.control,
            "specs": {a.name: dict(a.description or {}) for a in plan.arms},
            "perturbation_only": [a.name for a in plan.arms if a.perturbation_only],
            "gate_arm": plan.gate_arm, "max_robustness_drop": plan.max_robustness_drop, "alpha": plan.alpha,
            "blind": list(plan.blind), "max_blind_pass_rate": plan.max_blind_pass_rate}


def annotations_on(mode: str, env: Mapping[str, str]) -> bool:
    return mode == "github" or (mode == "auto" and env.get("GITHUB_ACTIONS") == "true")


def write_junit(path: Path, summary: RunSummary, locations: Locations, eval_root: Path,
                found: BaselineDiff | None) -> None:
    cwd = Path.cwd()
    context = JunitContext(locations=locations, base=str(cwd), eval_dir=relative_path(eval_root, cwd),
                           properties=found.properties() if found is not None else ())
    write_text_atomic(path, render_junit(summary, context))


def github_outputs(summary: RunSummary, locations: Locations, eval_root: Path, found: BaselineDiff | None,
                   out: TextIO, env: Mapping[str, str], *, gate_places: Mapping[str, SampleLocation] | None = None,
                   html: str | None = None) -> list[str]:
    """Workflow commands on ``out`` (the runner reads stdout) and the job summary, if GitHub asks.

    Returns what was written, as ``Wrote ...`` names it.
    """
    workspace = env.get("GITHUB_WORKSPACE") or str(Path.cwd())
    lines = github_annotations(summary, locations, workspace=workspace,
                               eval_dir=relative_path(eval_root, Path.cwd()), gate_places=gate_places)
    if lines:
        print(file=out)
        for line in lines:
            write_command(out, line)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if not summary_path:
        return []
    text = step_summary(summary, found, html=None if html is None else relative_path(Path(html), workspace),
                        artifacts_url=artifacts_url(env))
    try:
        with open(summary_path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    except OSError as exc:
        raise OutputError(f"cannot append the job summary to GITHUB_STEP_SUMMARY ({summary_path}): "
                          f"{exc.strerror or exc}") from None
    return [f"the job summary to {summary_path}"]


def artifacts_url(env: Mapping[str, str]) -> str | None:
    """The workflow run's page, where uploaded artifacts are listed (GitHub's own variables)."""
    server, repository, run = (env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    return f"{server}/{repository}/actions/runs/{run}#artifacts" if server and repository and run else None


def gate_places(full: Plan, request: RunRequest) -> dict[str, SampleLocation]:
    """Where each configured gate is set: its case file's or config.yaml's ``thresholds`` (a gate the
    command line sets has no place in a file)."""
    places: dict[str, SampleLocation] = {}
    for c in full.cases:
        case, t = c.case, c.case.thresholds
        if t is None:
            continue
        at = SampleLocation(case.path, case.document.line(("thresholds",)))
        places[f"{case.name}_min_pass_rate"] = places[f"{case.name}_max_failures"] = at
        for target in t.per_target or {}:
            places[f"{case.name}_{target}_min_pass_rate"] = SampleLocation(
                case.path, case.document.line(("thresholds", "per_target", target)))
    config = full.eval_dir.config
    if config.thresholds is None:
        return places
    path = full.eval_dir.root / "config.yaml"
    at = SampleLocation(path, config.thresholds_line)
    from_file = {"eval_min_pass_rate": request.gates.min_pass_rate, "eval_max_failures": request.gates.max_failures,
                 "max_p95_latency": request.gates.max_p95_latency_s, "max_cost": request.gates.max_cost}
    places.update({name: at for name, given in from_file.items() if given is None})
    if request.gates.min_target_pass_rate is None:
        for target, line in config.per_target_lines.items():
            places[f"eval_{target}_min_pass_rate"] = SampleLocation(path, line or None)
    return places


def write_outputs(summary: RunSummary, request: RunRequest, full: Plan, found: BaselineDiff | None,
                  out: TextIO, env: Mapping[str, str] | None = None) -> list[str]:
    """JUnit XML and GitHub's outputs, as the request asks; returns what was written."""
    env = os.environ if env is None else env
    # A shard's failures are annotated once, by merge-reports, unless asked for explicitly.
    github = annotations_on(request.ci.annotations, env) and not (request.ci.shard and request.ci.annotations == "auto")
    if request.ci.junit_xml is None and not github:
        return []
    locations = sample_locations(c.case for c in full.cases)
    root = full.eval_dir.root
    written = []
    if request.ci.junit_xml is not None:
        write_junit(Path(request.ci.junit_xml), summary, locations, root, found)
        written.append(display_path(request.ci.junit_xml))
    if github:
        written += github_outputs(summary, locations, root, found, out, env,
                                  gate_places=gate_places(full, request), html=request.outputs.html)
    return written
