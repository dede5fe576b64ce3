"""The ``agreement`` command: how far two labellers of the same samples agree, per target and overall.

Each side is an eval directory or one case file. Samples are matched by case (by name between
two directories; two single files are one case), target and exact time; ignored samples and
drafts are not labels and take no part. Both sides must label the same samples: the first one
only one side has is a located error (file, line, YAML path), exit 2.

Overall figures pool every target: an item's category is its (target, label) pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from ..cases.evaldir import load_cases, open_eval_dir
from ..cases.model import Case, block_times
from ..cases.parse import parse_case
from ..compare.modes import CompareConfig
from ..errors import Problem, UsageError, ValidationError
from ..reports.json_report import write_report
from ..reports.tables import pct, table
from ..statistics.agreement import VARIANCE, Kappa, cohen_kappa, within_tolerance
from ..support.jsonvalues import canonical_key, render_json
from ..support.timevalues import format_time
from ..yamltext.source import load_yaml_file

#: (case — empty when two single files are compared —, target, time)
Key = tuple[str, str, Fraction]
#: Disagreements the console lists.
SHOWN = 10


@dataclass(frozen=True, slots=True)
class Label:
    case: Case
    target: str
    time: Fraction
    value: Any
    compare: CompareConfig | None
    line: int | None
    yaml_path: str


@dataclass(frozen=True, slots=True)
class TargetAgreement:
    target: str
    kappa: Kappa
    #: Numeric targets: share of samples whose two numbers differ by at most the tolerance, and that tolerance.
    within: float | None
    tolerance: float | None

    def to_json(self) -> dict[str, Any]:
        within = None if self.within is None else {"tolerance": self.tolerance, "agreement": self.within}
        return {"target": self.target, **self.kappa.to_json(), "within_tolerance": within}


def execute_agreement(first: Path, second: Path, out: TextIO, *, output_json: Path | None = None,
                      confidence: float = 0.95) -> None:
    single = first.is_file() and second.is_file()
    if first.is_file() != second.is_file() and first.exists() and second.exists():
        raise UsageError(f"give two eval directories or two case files, not one of each: {first}, {second}")
    a, b = _labels(first, single), _labels(second, single)
    _check_same_samples(first, a, second, b)
    keys = list(a)
    targets: dict[str, list[Key]] = {}
    for key in keys:
        targets.setdefault(key[1], []).append(key)
    rows = [_target(name, mine, a, b, confidence) for name, mine in sorted(targets.items())]
    overall = cohen_kappa([((k[1], canonical_key(a[k].value)), (k[1], canonical_key(b[k].value))) for k in keys],
                          confidence)
    disagreements = [k for k in keys if canonical_key(a[k].value) != canonical_key(b[k].value)]
    _print(first, second, rows, overall, [(a[k], b[k]) for k in disagreements], out)
    if output_json is not None:
        report = {"report_type": "label_agreement", "a": str(first), "b": str(second), "samples": len(keys),
                  "confidence": confidence, "variance": VARIANCE, "targets": [r.to_json() for r in rows],
                  "overall": overall.to_json() if overall is not None else None,
                  "disagreements": [_disagreement_json(a[k], b[k]) for k in disagreements]}
        write_report(output_json, report)


def _target(name: str, keys: list[Key], a: dict[Key, Label], b: dict[Key, Label], confidence: float) -> TargetAgreement:
    kappa = cohen_kappa([(canonical_key(a[k].value), canonical_key(b[k].value)) for k in keys], confidence)
    assert kappa is not None
    numbers = [(a[k].value, b[k].value) for k in keys]
    if not all(_is_number(x) and _is_number(y) for x, y in numbers):
        return TargetAgreement(name, kappa, None, None)
    tolerance = max((c.tolerance for k in keys for c in (a[k].compare, b[k].compare)
                     if c is not None and c.mode == "numeric"), default=0.0)
    return TargetAgreement(name, kappa, within_tolerance([(float(x), float(y)) for x, y in numbers], tolerance),
                           tolerance)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _labels(path: Path, single: bool) -> dict[Key, Label]:
    """Every labelled sample of a case file or an eval directory, in file order."""
    if path.is_file():
        doc, problems = load_yaml_file(path)
        case = None
        if not problems:
            case, problems = parse_case(doc, path, allow_empty=True)
        if problems or case is None:
            raise ValidationError(problems)
        cases = [case]
    elif path.is_dir():
        eval_dir = open_eval_dir(path)
        cases = load_cases(eval_dir, eval_dir.case_paths, allow_empty=True)
    else:
        raise UsageError(f"{path}: no such eval directory or case file; give two eval directories or two case files")
    labels: dict[Key, Label] = {}
    for case in cases:
        for target in case.targets:
            for block in target.blocks:
                if block.ignore is not None or not block.has_expect:
                    continue
                where = ("targets", target.id, "samples", block.index)
                for time in block_times(block):
                    labels[("" if single else case.name, target.id, time)] = Label(
                        case, target.id, time, block.expect, block.compare, case.document.line(where),
                        f"targets.{target.id}.samples[{block.index}]")
    return labels


def _check_same_samples(first: Path, a: dict[Key, Label], second: Path, b: dict[Key, Label]) -> None:
    problems = [_missing(label, second) for key, label in a.items() if key not in b]
    problems += [_missing(label, first) for key, label in b.items() if key not in a]
    if problems:
        more = f" ({len(problems) - 20} more not shown)" if len(problems) > 20 else ""
        raise ValidationError(problems[:20], hint=f"Both sides must label the same samples{more}: add the missing "
                              "labels, or mark a sample `ignore` on both sides.")


def _missing(label: Label, other: Path) -> Problem:
    what = f"{label.case.name} / {label.target} at {format_time(label.time)}s"
    return Problem(str(label.case.path), label.yaml_path, f"sample {what} is labelled here but not in {other}",
                   label.line)


def _disagreement_json(a: Label, b: Label) -> dict[str, Any]:
    return {"case": a.case.name, "target": a.target, "at": float(a.time), "a": a.value, "b": b.value,
            "a_location": f"{a.case.path}:{a.line}", "b_location": f"{b.case.path}:{b.line}"}


def _ci(k: Kappa) -> str:
    if k.kappa is None or k.low is None or k.high is None:
        return "undefined (one category)"
    return f"{k.kappa:.3f} ({k.low:.3f} to {k.high:.3f})"


def _print(first: Path, second: Path, rows: list[TargetAgreement], overall: Kappa | None,
           disagreements: list[tuple[Label, Label]], out: TextIO) -> None:
    level = f"{(overall.confidence if overall else 0.95) * 100:g}%"
    print(f"Agreement: A = {first}, B = {second}; {overall.items if overall else 0} samples labelled by both",
          file=out)
    body = [[r.target, str(r.kappa.items), pct(r.kappa.observed), _ci(r.kappa),
             "-" if r.within is None else f"{pct(r.within)} (±{r.tolerance:g})"] for r in rows]
    if overall is not None:
        body.append(["Overall", str(overall.items), pct(overall.observed), _ci(overall), ""])
    print(table("", ["Target", "Samples", "Agreement", f"Cohen's kappa ({level} CI)", "Within tolerance"], body,
                [False, True, True, False, False]).lstrip("\n"), file=out)
    print(f"Kappa intervals: kappa ± z·SE with the {VARIANCE} standard error.\n"
          "Overall pools the targets: a sample's category is its target and its label.", file=out)
    if disagreements:
        print(f"Disagreements ({len(disagreements)}" + (f", first {SHOWN}" if len(disagreements) > SHOWN else "")
              + "):", file=out)
        for x, y in disagreements[:SHOWN]:
            print(f"  {x.case.name}/{x.target} at {format_time(x.time)}s: A {render_json(x.value, 40)} "
                  f"({x.case.path}:{x.line}), B {render_json(y.value, 40)} ({y.case.path}:{y.line})", file=out)
