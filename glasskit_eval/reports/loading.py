"""Read ``--output-json`` reports back into a RunResult, so any reporter can render them again.

Several reports (shards of one eval) merge trial by trial: trial N of the result is every
report's trial N, in the order the files were given. Gates are kept as each report recorded
them, named after their file when there is more than one; nothing is re-evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ReportReadError
from ..results import Gate, ResultFormatError, SampleResult, TimingMode, TrialResult
from ..summary import RunResult


def load_report_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportReadError(f"{path}: no such report file; pass the path written by "
                              "`run --output-json`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportReadError(f"{path}: cannot read the report ({exc})") from None
    def refuse(name: str) -> None:
        # Python's json reads NaN and Infinity; JSON (and our writer) does not.
        raise ReportReadError(f"{path}: {name} is not valid JSON; pass the file written by `run --output-json`")

    try:
        data = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise ReportReadError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); pass the "
                              "file written by `run --output-json`") from None
    if not isinstance(data, dict) or not isinstance(data.get("trials"), list):
        raise ReportReadError(f"{path}: not a glasskit_eval run report (no `trials` list); pass the file "
                              "written by `run --output-json`")
    return data


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
            if into["mode"] is None and mode in ("individual", "batch"):
                into["mode"] = TimingMode(mode)
    for trial_data in trials.values():
        for r in trial_data["results"]:
            if r.case not in cases:
                cases.append(r.case)
    eval_dir = next((d["eval_dir"] for _, d in reports if isinstance(d.get("eval_dir"), str)), "")
    return RunResult(
        eval_dir=eval_dir, cases=tuple(cases), repeat=max(repeat, len(trials)),
        trials=tuple(TrialResult(trial=n, results=tuple(v["results"]), gates=tuple(v["gates"]),
                                 duration_seconds=v["duration"], timing_mode=v["mode"])
                     for n, v in sorted(trials.items())),
        gates=tuple(run_gates), duration_seconds=duration)


def _gate(data: Any, label: str, path: Path, where: str) -> Gate:
    if (not isinstance(data, dict) or not isinstance(data.get("name"), str)
            or not isinstance(data.get("passed"), bool)):
        raise ReportReadError(f"{path}: {where}: a gate needs a `name` and a boolean `passed`")
    return Gate(name=data["name"], passed=data["passed"], message=label + str(data.get("message", "")))


def _get(data: dict[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
