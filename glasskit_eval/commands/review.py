"""The ``review`` command: check its options against the eval directory, bind the server, serve."""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from ..errors import Problem, UsageError, ValidationError
from ..review import casedata
from ..review.api import ReviewState
from ..review.report import load_emissions, load_overlay, load_suspects
from ..review.server import ReviewServer, run


@dataclass(frozen=True)
class ReviewOptions:
    eval_dir: str | Path = "eval"
    case: str | None = None
    target: str | None = None
    time: Fraction | None = None
    port: int = 0
    report: str | Path | None = None
    verbose: bool = False
    #: Open the report's first suspect label and step through them.
    suspects: bool = False


def execute_review(options: ReviewOptions, out: TextIO, *, open_browser: bool) -> None:
    """Serve until Ctrl+C."""
    run(start_review(options), out, open_browser=open_browser)


def start_review(options: ReviewOptions) -> ReviewServer:
    """Validate the options and bind 127.0.0.1; raises UsageError/ValidationError (exit 2)."""
    if options.target is not None and options.case is None:
        raise UsageError("--target needs --case: it focuses a target of the case opened first")
    if options.time is not None and options.case is None:
        raise UsageError("--time needs --case: it seeks in the case opened first")
    if not 0 <= options.port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, got {options.port}")
    root = Path(options.eval_dir).expanduser().resolve()
    if not root.is_dir():
        raise ValidationError([Problem(str(root), "", "eval directory does not exist")],
                              hint="Pass --eval-dir pointing at the directory that holds cases/.")
    if not (root / "cases").is_dir():
        raise ValidationError([Problem(str(root / "cases"), "", "cases/ directory is missing")],
                              hint="Create <eval-dir>/cases/ with one .yaml case file per video.")
    suspects = _suspects(options)
    if suspects:
        first = suspects[0]
        options = replace(options, case=str(first["case"]), target=str(first["target"]),
                          time=Fraction(str(first["at"])))
    initial = _initial(root, options)
    markers, arms = load_overlay(Path(options.report).expanduser()) if options.report else ({}, [])
    emissions = load_emissions(Path(options.report).expanduser()) if options.report else {}
    state = ReviewState(root=root, port=options.port, initial=initial, markers=markers, emissions=emissions,
                        report_path=str(options.report) if options.report else None, report_arms=arms,
                        suspects=suspects)
    try:
        return ReviewServer(state, options.port, verbose=options.verbose)
    except OSError as exc:
        raise UsageError(f"cannot start the review server on 127.0.0.1:{options.port}: "
                         f"{exc.strerror or exc}; pick another --port or use 0 for any free one") from None


def _suspects(options: ReviewOptions) -> list[dict[str, Any]]:
    if not options.suspects:
        return []
    if options.report is None:
        raise UsageError("--suspects needs --report R.json: the run report that lists the suspect labels")
    if options.case is not None or options.target is not None or options.time is not None:
        raise UsageError("--suspects opens the first suspect itself; leave out --case, --target and --time")
    try:
        return load_suspects(Path(options.report).expanduser())
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _initial(root: Path, options: ReviewOptions) -> dict[str, object]:
    if options.case is None:
        return {}
    case = options.case
    if "/" in case or "\\" in case:
        raise UsageError(f"--case takes a case filename or stem, not a path: {case!r}")
    stem = case[:-5] if case.endswith(".yaml") else case
    paths = casedata.list_case_paths(root)
    if stem not in paths:
        known = ", ".join(paths) or "(none)"
        raise UsageError(f"unknown case {case!r} in {root / 'cases'}; cases: {known}")
    if options.target is not None:
        loaded = casedata.load(root, stem)
        if loaded.case is not None and loaded.case.target(options.target) is None:
            targets = ", ".join(t.id for t in loaded.case.targets) or "(none)"
            raise UsageError(f"unknown target {options.target!r} in case {stem!r}; targets: {targets}")
    return {"case": stem, "target": options.target,
            "time": float(options.time) if options.time is not None else None}
