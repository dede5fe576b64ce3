"""Merging shard reports into the report one unsharded run would have written.

The shards' results are put back in the selection's order and gated with the same code, options
and thresholds as :func:`~glasskit_eval.evaluation.trials.run_trials`, so summaries, stability and gates
are those of an unsharded run; only durations differ (a merged trial lasts as long as its slowest
shard). Shards that do not fit together are refused, naming the shards or samples at fault.

Shards of a run with arms carry the arms (names, control, specs, who is gated, the robustness
gate): each sample is expected once per arm, the results are ordered as the unsharded run
orders them (per case, arm by arm), gates are applied per arm, and the arms' comparisons and
Pareto set are recomputed from the merged results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cases.model import STREAM_GATE_NAMES, StreamGates, Thresholds
from ..errors import UsageError
from ..evaluation.gates import (
    CaseThresholds,
    GateOptions,
    arm_comparison_gates,
    arm_trials,
    evaluate_gates,
    per_arm,
    run_gates,
)
from ..evaluation.streamgates import stream_gates
from ..plan.shard import MAX_SHARDS
from ..reports.locations import SampleKey, SampleLocation
from ..reports.streamload import stream_from_json
from ..results import (
    Gate,
    ResultFormatError,
    SampleResult,
    StreamResult,
    TimingMode,
    TrialResult,
)
from ..summary import RunResult
from ..support.strictjson import LoadError
from .recorded import checks_of, group_of
from .requests import Gates

_REQUIRED = ("total", "eval_fingerprint", "options", "cases", "selection", "thresholds", "case_files")
#: What every shard of one run shares (``arms`` only in a run with arms).
_SAME = (*_REQUIRED, "arms")


#: The check of each gate option a shard report carries (as a resumed manifest's).
_GATE_CHECKS = checks_of(Gates)


@dataclass(frozen=True, slots=True)
class MergedArms:
    """The arms block the shards share (see ``ci_outputs.arms_block``)."""

    names: tuple[str, ...]
    control: str
    specs: Mapping[str, Mapping[str, Any]]
    perturbation_only: frozenset[str]
    gate_arm: str | None
    max_robustness_drop: float | None
    alpha: float
    #: Blind arms and ``--max-blind-pass-rate`` (absent from shards written before the gate existed).
    blind: tuple[str, ...] = ()
    max_blind_pass_rate: float | None = None

    @property
    def plain(self) -> bool:
        return False  # a plain run's shards carry no arms

    def gated(self, name: str) -> bool:
        return self.gate_arm is None or self.gate_arm == name


@dataclass(frozen=True, slots=True)
class Merged:
    result: RunResult
    locations: dict[SampleKey, SampleLocation]
    arms: MergedArms | None = None


def _arms(block: Mapping[str, Any]) -> MergedArms | None:
    arms = block.get("arms")
    if arms is None:
        return None
    names = tuple(arms["names"])
    return MergedArms(names, arms["control"], arms["specs"], frozenset(arms["perturbation_only"]),
                      arms["gate_arm"], arms["max_robustness_drop"], float(arms["alpha"]),
                      tuple(n for n in arms.get("blind") or () if n in names), arms.get("max_blind_pass_rate"))


def _arms_well_formed(arms: object) -> bool:
    if arms is None:
        return True
    if not isinstance(arms, Mapping):
        return False
    names, specs, drop = arms.get("names"), arms.get("specs"), arms.get("max_robustness_drop")
    return (isinstance(names, list) and bool(names) and all(isinstance(n, str) and n for n in names)
            and len(set(names)) == len(names) and arms.get("control") in names
            and isinstance(specs, Mapping) and all(isinstance(v, Mapping) for v in specs.values())
            and isinstance(arms.get("perturbation_only"), list)
            and all(n in names for n in arms["perturbation_only"])
            and (arms.get("gate_arm") is None or arms.get("gate_arm") in names)
            and (drop is None or (isinstance(drop, (int, float)) and not isinstance(drop, bool)))
            and isinstance(arms.get("alpha"), (int, float)) and not isinstance(arms.get("alpha"), bool)
            and 0 < arms["alpha"] < 1
            and isinstance(arms.get("blind", []), list)
            and (arms.get("max_blind_pass_rate") is None
                 or (isinstance(arms["max_blind_pass_rate"], (int, float))
                     and not isinstance(arms["max_blind_pass_rate"], bool))))


def _thresholds(data: Mapping[str, Any] | None) -> Thresholds | None:
    if data is None:
        return None
    streams = {target: StreamGates(**gates) for target, gates in (data.get("stream_gates") or {}).items()}
    per_target = data.get("per_target")
    if per_target and data.get("per_target_order"):
        # In the file's order, as the unsharded run gates them (older shards: the report's sorted order).
        per_target = {target: per_target[target] for target in data["per_target_order"]}
    # The run-level keys are absent from shards written before they travelled: unset, as then.
    return Thresholds(data.get("min_pass_rate"), data.get("max_failures"), per_target,
                      max_p95_latency_s=data.get("max_p95_latency_s"), max_cost=data.get("max_cost"),
                      stream_gates=streams or None)


def _shard(name: str, report: object) -> Mapping[str, Any]:
    block = report.get("shard") if isinstance(report, Mapping) else None
    if not isinstance(block, Mapping) or not all(k in block for k in (*_REQUIRED, "index")):
        raise UsageError(f"{name} is not a shard report; merge the --output-json reports of "
                         "`run --shard I/N`")
    if not _well_formed(block):
        raise UsageError(f"{name}: its `shard` object is damaged; rerun that shard")
    return block


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _well_formed(block: Mapping[str, Any]) -> bool:
    """The shapes merging relies on, so a hand-edited report is refused rather than crashing."""
    selection, options, thresholds = block["selection"], block["options"], block["thresholds"]
    files = block["case_files"]
    return (_is_int(block["index"]) and _is_int(block["total"])
            and 1 <= block["index"] <= block["total"] <= MAX_SHARDS
            and isinstance(options, Mapping) and _is_int(options.get("repeat")) and options["repeat"] >= 1
            and all(check(options[name]) for name, check in _GATE_CHECKS.items() if name in options)
            and isinstance(files, Mapping) and isinstance(block["cases"], list)
            and isinstance(selection, list)
            and all(isinstance(e, list) and len(e) == 4 and isinstance(e[0], str) and e[0] in files
                    and isinstance(e[1], str) and _is_int(e[2]) and (e[3] is None or _is_int(e[3]))
                    for e in selection)
            and isinstance(thresholds, Mapping) and isinstance(thresholds.get("cases"), list)
            and all(isinstance(c, Mapping) and "case" in c and "thresholds" in c for c in thresholds["cases"])
            and all(isinstance(t, Mapping) and _stream_thresholds_ok(t.get("thresholds"))
                    and _run_thresholds_ok(t.get("thresholds"))
                    for t in [*thresholds["cases"], {"thresholds": thresholds.get("eval")}])
            and isinstance(block.get("streams", []), list)
            and all(isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)
                    for e in block.get("streams", []))
            and _arms_well_formed(block.get("arms"))
            and isinstance(block.get("undeclared", {}), Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in block.get("undeclared", {}).items()))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _run_thresholds_ok(data: object) -> bool:
    if not isinstance(data, Mapping):
        return True
    order = data.get("per_target_order")
    return all(data.get(key) is None or _number(data[key]) for key in ("max_p95_latency_s", "max_cost")) and (
        order is None or (isinstance(order, list) and all(isinstance(t, str) for t in order)
                          and isinstance(data.get("per_target"), Mapping) and sorted(order) == sorted(data["per_target"])))


def _stream_thresholds_ok(data: object) -> bool:
    if not isinstance(data, Mapping) or data.get("stream_gates") is None:
        return True
    gates = data["stream_gates"]
    return isinstance(gates, Mapping) and all(
        isinstance(g, Mapping) and set(g) <= set(STREAM_GATE_NAMES)
        and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in g.values())
        for g in gates.values())


def _key_text(key: SampleKey | tuple[str | None, str, str, int]) -> str:
    if len(key) == 4:
        arm, *rest = key
        return f"{rest[0]} / {rest[1]} sample {rest[2]}" + (f" (arm {arm})" if arm is not None else "")
    return f"{key[0]} / {key[1]} sample {key[2]}"


def _listing(keys: Sequence[SampleKey | tuple[str | None, str, str, int]]) -> str:
    shown = ", ".join(_key_text(k) for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def _check_shards(named: Sequence[tuple[str, Mapping[str, Any]]]) -> Mapping[str, Any]:
    first_name, first = named[0]
    for name, block in named[1:]:
        for key in _SAME:
            if block.get(key) != first.get(key):
                what = {"eval_fingerprint": "eval (case files, config or videos)",
                        "options": "options", "total": "shard count"}.get(key, key)
                raise UsageError(f"{name} and {first_name} come from different runs: their {what} differ; "
                                 "merge the shards of one matrix run")
    total = first["total"]
    indexes = [block["index"] for _name, block in named]
    doubled = sorted({i for i in indexes if indexes.count(i) > 1})
    given = set(indexes)
    missing = [i for i in range(1, total + 1) if i not in given]
    if doubled:
        names = [name for name, block in named if block["index"] in doubled]
        raise UsageError(f"shard {doubled[0]}/{total} is given more than once ({', '.join(names)})")
    if missing:
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise UsageError("missing shards: " + ", ".join(f"{i}/{total}" for i in missing[:10]) + more
                         + f"; pass all {total} shard reports")
    return first


def _trial_results(name: str, report: Mapping[str, Any], trial: int) -> list[SampleResult]:
    trials = report.get("trials")
    if not isinstance(trials, list) or len(trials) < trial or not isinstance(trials[trial - 1], Mapping):
        raise UsageError(f"{name} has no trial {trial}")
    try:
        return [SampleResult.from_json(r) for r in trials[trial - 1].get("results") or []]
    except ResultFormatError as exc:
        raise UsageError(f"{name}: trial {trial} has a damaged result ({exc})") from None


def _timing(named: Sequence[tuple[str, Mapping[str, Any]]], trial: int) -> TimingMode | None:
    for _name, report in named:
        mode = report["trials"][trial - 1].get("summary", {}).get("evaluation_timing_mode")
        if mode is not None and report["trials"][trial - 1].get("summary", {}).get("evaluated"):
            return TimingMode.parse(mode)
    return TimingMode.INDIVIDUAL


def _stream_text(key: tuple[str, str, str | None]) -> str:
    return f"{key[0]} / {key[1]}" + (f" (arm {key[2]})" if key[2] is not None else "")


def _trial_streams(named: Sequence[tuple[str, Mapping[str, Any]]], trial: int,
                   selection: Sequence[tuple[str, str, str | None]]) -> tuple[StreamResult, ...]:
    """The trial's streams from every shard, in the selection's order; each exactly once (per arm)."""
    found: dict[tuple[str, str, str | None], StreamResult] = {}
    for name, report in named:
        for i, item in enumerate(report.get("streams") or []):
            if not isinstance(item, Mapping) or item.get("trial") != trial:
                continue
            try:
                stream = stream_from_json(item)
            except LoadError as exc:
                raise UsageError(f"{name}: streams[{i}] is damaged ({exc})") from None
            key = (stream.case, stream.target, stream.arm)
            if key in found:
                raise UsageError(f"trial {trial}: stream {_stream_text(key)} is reported by more than one shard")
            if key not in selection:
                raise UsageError(f"trial {trial}: stream {_stream_text(key)} is outside the run's selection")
            found[key] = stream
    missing = [k for k in selection if k not in found]
    if missing:
        raise UsageError(f"trial {trial}: no shard reports stream {_stream_text(missing[0])}; rerun the "
                         "shard that should have run it")
    return tuple(found[k] for k in selection)


def merge_reports(named: Sequence[tuple[str, Mapping[str, Any]]]) -> Merged:
    """Recompute one run from shard reports given as (name, parsed JSON)."""
    if not named:
        raise UsageError("merge-reports needs at least one shard report")
    blocks = [(name, _shard(name, report)) for name, report in named]
    block = _check_shards(blocks)
    ordered = sorted(zip(blocks, named), key=lambda pair: pair[0][1]["index"])
    reports = [(name, report) for (name, _b), (_n, report) in ordered]
    options = block["options"]
    selection: list[SampleKey] = [(c, t, i) for c, t, i, _line in block["selection"]]
    # Every gate the shards' command line set, whichever they are.
    gate_options = group_of(Gates, options).options()
    eval_thresholds = _thresholds(block["thresholds"]["eval"])
    cases = [CaseThresholds(c["case"], _thresholds(c["thresholds"])) for c in block["thresholds"]["cases"]]
    # Absent from shards written before it travelled: no such gates, as merging made then.
    undeclared: dict[str, str] = block.get("undeclared") or {}
    arms = _arms(block)
    # Each sample once per arm, in the unsharded run's order: per case, arm by arm.
    names: tuple[str | None, ...] = arms.names if arms is not None else (None,)
    by_case: dict[str, list[SampleKey]] = {}
    for sample_key in selection:
        by_case.setdefault(sample_key[0], []).append(sample_key)
    expected = [(arm, *k) for keys in by_case.values() for arm in names for k in keys]
    # Streams in the same order: per case, arm by arm, each arm's in declaration order.
    stream_targets: dict[str, list[str]] = {}
    for case, target in block.get("streams") or []:
        stream_targets.setdefault(case, []).append(target)
    stream_selection = [(c, t, arm) for c, targets in stream_targets.items() for arm in names for t in targets]
    position = {key: n for n, key in enumerate(expected)}
    trials: list[TrialResult] = []
    for trial in range(1, int(options["repeat"]) + 1):
        found: dict[tuple[str | None, str, str, int], SampleResult] = {}
        doubled: list[tuple[str | None, str, str, int]] = []
        for name, report in reports:
            for sample in _trial_results(name, report, trial):
                armed = (sample.arm, *sample.key)
                if armed in found:
                    doubled.append(armed)
                found[armed] = sample
        extra = [k for k in found if k not in position]
        missing = [k for k in expected if k not in found]
        if doubled:
            raise UsageError(f"trial {trial}: samples reported by more than one shard: {_listing(doubled)}")
        if extra:
            raise UsageError(f"trial {trial}: samples outside the run's selection: {_listing(extra)}")
        if missing:
            raise UsageError(f"trial {trial}: no shard reports {_listing(missing)}; rerun the shard "
                             "that should have run them")
        results = tuple(found[k] for k in expected)
        streams = _trial_streams(reports, trial, stream_selection)
        gates = _trial_gates(results, streams, arms, gate_options, eval_thresholds, cases, undeclared)
        duration = max(float(r["trials"][trial - 1].get("summary", {}).get("duration_seconds") or 0.0)
                       for _n, r in reports)
        trials.append(TrialResult(trial=trial, results=results, gates=tuple(gates), duration_seconds=duration,
                                  timing_mode=_timing(reports, trial), streams=streams))
    whole_run = _run_gates(trials, gate_options, eval_thresholds, arms)
    first = reports[0][1]
    duration = max(float(r.get("summary", {}).get("duration_seconds") or 0.0) for _n, r in reports)
    result = RunResult(eval_dir=str(first.get("eval_dir")), cases=tuple(block["cases"]),
                       repeat=int(options["repeat"]), trials=tuple(trials), gates=tuple(whole_run),
                       duration_seconds=duration)
    root = Path(str(first.get("eval_dir")))
    files = block["case_files"]
    locations = {(c, t, i): SampleLocation(root / files[c], line) for c, t, i, line in block["selection"]}
    return Merged(result, locations, arms)


def _trial_gates(results: Sequence[SampleResult], streams: Sequence[StreamResult], arms: MergedArms | None,
                 options: GateOptions, thresholds: Thresholds | None, cases: Sequence[CaseThresholds],
                 undeclared: Mapping[str, str]) -> list[Gate]:
    """A trial's gates per gated arm, as the trial loop makes them (``evaluation.trials``)."""

    def of(arm: str | None) -> list[Gate]:
        mine = [r for r in results if r.arm == arm]
        fed = [s for s in streams if s.arm == arm]
        return (evaluate_gates(mine, options=options, eval_thresholds=thresholds, cases=cases, undeclared=undeclared)
                + stream_gates(fed, options=options.streams, eval_thresholds=thresholds, cases=cases))

    return per_arm(arms, of)


def _run_gates(trials: Sequence[TrialResult], options: GateOptions, thresholds: Thresholds | None,
               arms: MergedArms | None) -> list[Gate]:
    """The run-level gates (per gated arm), then each perturbation arm's robustness gate and the blind gate."""
    gates = per_arm(arms, lambda arm: run_gates(arm_trials(trials, arm), options, thresholds))
    if arms is None:
        return gates
    return gates + arm_comparison_gates(
        trials, control=arms.control, perturbed=[n for n in arms.names if n in arms.perturbation_only],
        blind=arms.blind, max_robustness_drop=arms.max_robustness_drop, alpha=arms.alpha,
        max_blind_pass_rate=arms.max_blind_pass_rate)
