"""Read ``--output-json`` reports back into a RunResult, so any reporter can render them again.

Several reports (shards of one eval) merge trial by trial: trial N of the result is every
report's trial N, in the order the files were given. Gates are kept as each report recorded
them, named after their file when there is more than one; nothing is re-evaluated. A report's
``early_stop`` block (``run --early-stop``) goes back to its trials, so the decision lines render
again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ReportReadError
from ..results import (
    RESULT_SHAPE,
    EarlyStop,
    Gate,
    GateDecision,
    ResultFormatError,
    SampleResult,
    StreamResult,
    TimingMode,
    TrialResult,
)
from ..summary import RunResult
from ..support import strictjson as sj
from .streamload import STREAM_SHAPE, stream_from_json

if TYPE_CHECKING:
    from ..arms.compare import ArmsReport

_WRITTEN_BY = "pass the file written by `run --output-json`"
_TIMING = sj.Str(nullable=True, choices=("individual", "batch_amortized", "batch"))
_RATE = sj.Num(0, 1)
_GATE = sj.Obj({"name": sj.Str(), "passed": sj.Bool(), "message": sj.Str()})
_COUNT = sj.Int()
_SECONDS = sj.Seconds(nullable=True)
#: Our additions to both summaries: absent from upstream's reports, checked when present.
_OURS = {"latency": sj.Obj(nullable=True), "batch_call_latency": sj.Obj(nullable=True),
         "retried_samples": _COUNT, "timeout_errors": _COUNT, "usage": sj.MapOf(sj.Num()),
         "pass_rate_ci": sj.Obj(nullable=True), "minimum_detectable_drop": sj.Obj(nullable=True)}
TRIAL_SUMMARY_SHAPE = sj.Obj(
    required={"passed": _COUNT, "failed": _COUNT, "errors": _COUNT, "ignored": _COUNT, "evaluated": _COUNT,
              "pass_rate": _RATE, "duration_seconds": sj.Seconds(), "average_evaluation_seconds_per_sample": _SECONDS,
              "throughput_samples_per_second": _SECONDS, "evaluation_timing_mode": _TIMING},
    optional=_OURS)
SUMMARY_SHAPE = sj.Obj(
    required={"attempt_pass_rate": _RATE, "average_evaluation_seconds_per_attempt": _SECONDS,
              "consistently_failed_samples": _COUNT, "consistently_passed_samples": _COUNT,
              "duration_seconds": sj.Seconds(), "error_attempts": _COUNT, "error_samples": _COUNT,
              "evaluated_attempts": _COUNT, "evaluated_samples": _COUNT, "evaluation_timing_mode": _TIMING,
              "failed_attempts": _COUNT, "flaky_samples": _COUNT, "ignored_samples": _COUNT,
              "maximum_trial_pass_rate": sj.Num(0, 1, nullable=True),
              "mean_trial_pass_rate": sj.Num(0, 1, nullable=True),
              "minimum_trial_pass_rate": sj.Num(0, 1, nullable=True), "passed_attempts": _COUNT,
              "successful_trials": _COUNT, "throughput_attempts_per_second": _SECONDS, "trials": _COUNT},
    optional=_OURS)
_CHANGE = sj.Obj(optional={"kind": sj.Str(), "case": sj.Str(), "target": sj.Str(),
                           "timestamp_s": sj.Seconds(nullable=True), "status": sj.Str(nullable=True),
                           "baseline_status": sj.Str(nullable=True)})
#: The ``baseline`` block a run with ``--baseline`` records (the HTML report shows it again).
_BASELINE = sj.Obj(optional={"path": sj.Str(), "matched_samples": _COUNT, "counts": sj.MapOf(_COUNT),
                             "changes": sj.Arr(_CHANGE), "significance": sj.Obj(nullable=True)})
#: What ``run --early-stop`` decided (``reports.early_stop``): gates carry their trial with ``--repeat``.
_DECISION = sj.Obj(required={"name": sj.Str(), "verdict": sj.Str(choices=("pass", "fail", "undecided")),
                             "low": sj.Num(), "high": sj.Num(), "minimum": sj.Num(), "after": _COUNT,
                             "planned": _COUNT, "early": sj.Bool()},
                   optional={"trial": sj.Int(1), "cached": _COUNT})
_EARLY_STOP = sj.Obj(required={"samples_evaluated": _COUNT, "samples_planned": _COUNT, "seed": sj.Int(None),
                               "block_s": sj.Num(0), "alpha": _RATE, "gates": sj.Arr(_DECISION)},
                     optional={"samples_cached": _COUNT}, nullable=True)
#: A run report (ours or upstream's ``schema_version`` 1) as the readers rely on it: every result and
#: both kinds of summary fully; blocks no reader uses only by type. Unknown keys are allowed.
REPORT_SHAPE = sj.Obj(
    required={"report_type": sj.Str(choices=("eval_run",)), "schema_version": sj.Int(1, 1),
              "summary": SUMMARY_SHAPE,
              "trials": sj.Arr(sj.Obj(required={"trial": sj.Int(1), "results": sj.Arr(RESULT_SHAPE),
                                                "gates": sj.Arr(_GATE), "success": sj.Bool(),
                                                "summary": TRIAL_SUMMARY_SHAPE}))},
    optional={"success": sj.Bool(), "eval_dir": sj.Str(), "cases": sj.Arr(sj.Str()), "repeat_count": sj.Int(1),
              "gates": sj.Arr(_GATE), "checkpoint": sj.Obj(nullable=True), "stability": sj.Arr(sj.Obj()),
              "by_target": sj.MapOf(sj.Obj()), "by_case": sj.MapOf(sj.Obj()), "baseline": _BASELINE,
              "shard": sj.Obj(), "observation_cache": sj.Obj(), "streams": sj.Arr(STREAM_SHAPE),
              "stream_stability": sj.Arr(sj.Obj()), "early_stop": _EARLY_STOP})


def load_report_file(path: Path, label: str | None = None) -> dict[str, Any]:
    """Read a run report through the strict loader and check it against :data:`REPORT_SHAPE`.

    Every reader of reports (``compare``, ``--baseline``, ``report``, ``merge-reports``, ``review
    --report``) comes here; damage is a :class:`ReportReadError` naming the file (``label``, default
    the path) and what is wrong where.
    """
    name = label or str(path)
    try:
        data = sj.load(path, sj.REPORT)
    except sj.NotFound:
        raise ReportReadError(f"{name}: no such report file; pass the path written by `run --output-json`") from None
    except sj.LoadError as exc:
        raise ReportReadError(f"{exc.located(name)}; {_WRITTEN_BY}") from None
    if not isinstance(data, dict) or "trials" not in data or data.get("report_type", "eval_run") != "eval_run":
        raise ReportReadError(f"{name}: not a glasskit_eval run report (no `trials` list); {_WRITTEN_BY}")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > 1:
        raise ReportReadError(f"{name}: report schema_version {version} is newer than this version reads (1); "
                              "upgrade glasskit_eval")
    try:
        sj.check(data, REPORT_SHAPE)
    except sj.LoadError as exc:
        raise ReportReadError(f"{name}: {exc}; {_WRITTEN_BY}") from None
    for i, item in enumerate(data.get("streams") or []):
        _stream(item, i, name)
    return data


def _stream(item: Any, index: int, name: str | Path) -> StreamResult:
    """One ``streams`` entry, its damage named by file and JSON path."""
    try:
        return stream_from_json(item)
    except sj.LoadError as exc:
        where = f"streams[{index}]" + ("" if exc.where in ("", "the top level") else f".{exc.where}")
        raise ReportReadError(f"{name}: {where}: {exc.reason}; {_WRITTEN_BY}") from None


def run_from_reports(reports: Sequence[tuple[Path, dict[str, Any]]]) -> RunResult:
    """One RunResult from parsed reports (see the module docstring for how several merge)."""
    if not reports:
        raise ReportReadError("no report files given")
    several = len(reports) > 1
    trials: dict[int, dict[str, Any]] = {}
    cases: list[str] = []
    run_gates: list[Gate] = []
    duration = 0.0
    repeat = 1
    for path, data in reports:
        label = f"{path.name}: " if several else ""
        for name in data.get("cases") or []:
            if isinstance(name, str) and name not in cases:
                cases.append(name)
        repeat = max(repeat, _int(data.get("repeat_count"), 1))
        duration = max(duration, _float(_get(data, "summary", "duration_seconds")))
        run_gates += [_gate(g, label, path, "gates") for g in data.get("gates") or []]
        for t, trial in enumerate(data["trials"]):
            where = f"trials[{t}]"
            if not isinstance(trial, dict) or not isinstance(trial.get("results"), list):
                raise ReportReadError(f"{path}: {where} has no `results` list")
            number = _int(trial.get("trial"), t + 1)
            into = trials.setdefault(number, {"results": [], "gates": [], "duration": 0.0, "mode": None})
            for i, item in enumerate(trial["results"]):
                try:
                    into["results"].append(SampleResult.from_json(item))
                except ResultFormatError as exc:
                    raise ReportReadError(f"{path}: {where}.results[{i}]: {exc}") from None
            into["gates"] += [_gate(g, label, path, f"{where}.gates") for g in trial.get("gates") or []]
            into["duration"] = max(into["duration"], _float(_get(trial, "summary", "duration_seconds")))
            mode = _get(trial, "summary", "evaluation_timing_mode")
            if into["mode"] is None and mode is not None:
                into["mode"] = TimingMode.parse(mode)
        for i, item in enumerate(data.get("streams") or []):
            stream = _stream(item, i, path)
            trials.setdefault(stream.trial, {"results": [], "gates": [], "duration": 0.0, "mode": None,
                                             "streams": []}).setdefault("streams", []).append(stream)
        _early_stop(data, trials, several)
    for trial_data in trials.values():
        for r in trial_data["results"]:
            if r.case not in cases:
                cases.append(r.case)
    eval_dir = next((d["eval_dir"] for _, d in reports if isinstance(d.get("eval_dir"), str)), "")
    return RunResult(
        eval_dir=eval_dir, cases=tuple(cases), repeat=max(repeat, len(trials)),
        trials=tuple(TrialResult(trial=n, results=tuple(v["results"]), gates=tuple(v["gates"]),
                                 duration_seconds=v["duration"], timing_mode=v["mode"],
                                 streams=tuple(v.get("streams", [])), early_stop=v.get("early_stop"))
                     for n, v in sorted(trials.items())),
        gates=tuple(run_gates), duration_seconds=duration)


def _early_stop(data: dict[str, Any], trials: dict[int, dict[str, Any]], several: bool) -> None:
    """The report's ``early_stop`` block back on its trials (checked by :data:`REPORT_SHAPE` already).

    A trial's counts are its own results' (evaluated; planned: every one not ignored), which is how
    the run counted them; a single trial keeps the block's. Merged with other reports, a trial's
    record is the first report's that has one.
    """
    block = data.get("early_stop")
    if not isinstance(block, dict):
        return
    numbers = [_int(t.get("trial"), i + 1) for i, t in enumerate(data["trials"])]
    # Said for the run as a whole: counted once, on the first trial given a record.
    cached = block.get("samples_cached", 0)
    for number in numbers:
        into = trials[number]
        if into.get("early_stop") is not None:
            continue
        decisions = tuple(GateDecision(g["name"], g["verdict"], float(g["low"]), float(g["high"]),
                                       float(g["minimum"]), g["after"], g["planned"], g["early"], g.get("cached", 0))
                          for g in block["gates"] if g.get("trial", number) == number)
        evaluated, planned = block["samples_evaluated"], block["samples_planned"]
        if len(numbers) > 1 or several:
            mine = next(t["results"] for i, t in enumerate(data["trials"]) if numbers[i] == number)
            evaluated = sum(1 for r in mine if r.get("status") not in ("ignored", "not_evaluated"))
            planned = sum(1 for r in mine if r.get("status") != "ignored")
        into["early_stop"] = EarlyStop(evaluated, planned, block["seed"], float(block["block_s"]),
                                       float(block["alpha"]), decisions, cached)
        cached = 0


def _gate(data: Any, label: str, path: Path, where: str) -> Gate:
    if (not isinstance(data, dict) or not isinstance(data.get("name"), str)
            or not isinstance(data.get("passed"), bool)):
        raise ReportReadError(f"{path}: {where}: a gate needs a `name` and a boolean `passed`")
    return Gate.recorded(data["name"], data["passed"], label + str(data.get("message", "")))


def _get(data: dict[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def arms_of_reports(reports: Sequence[tuple[Path, dict[str, Any]]], run: RunResult) -> ArmsReport | None:
    """A run with arms compared again from its tagged results (None when no result has an arm).

    The reports give what the results cannot: each arm's ``spec`` (which pixels it saw) and the
    control (``arm_comparisons``); the arms keep the order their results first appear in (the run's).
    """
    from ..arms.compare import compare_arms

    names = list(dict.fromkeys(r.arm for t in run.trials for r in t.results if r.arm is not None))
    if not names:
        return None
    specs: dict[str, dict[str, Any]] = {}
    controls: list[str] = []
    confidence, alpha = 0.95, 0.05
    for _path, data in reports:
        arms = data.get("arms")
        for name, block in (arms.items() if isinstance(arms, dict) else ()):
            if isinstance(block, dict) and isinstance(block.get("spec"), dict):
                specs.setdefault(name, block["spec"])
        comparisons = data.get("arm_comparisons")
        controls += [c["control"] for c in (comparisons if isinstance(comparisons, list) else ())
                     if isinstance(c, dict) and isinstance(c.get("control"), str)]
        level = _get(data, "summary", "pass_rate_ci", "level")
        if isinstance(level, float) and 0 < level < 1:
            confidence = level
        level = _get(data, "summary", "minimum_detectable_drop", "alpha")
        if isinstance(level, float) and 0 < level < 1:
            alpha = level
    control = next((c for c in controls if c in names), names[0])
    order = [control, *(n for n in names if n != control)]
    return compare_arms([t.results for t in run.trials], order, control, specs, alpha=alpha, confidence=confidence)
