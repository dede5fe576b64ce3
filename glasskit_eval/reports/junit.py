"""JUnit XML (Jenkins / GitLab flavour) rendered from a RunSummary (pure; the caller writes it).

One ``<testsuite>`` per case and target (per trial with ``--repeat``, named ``… [trial N]``),
one ``<testcase>`` per sample named ``<target> @ <time>s`` with the case as ``classname`` and the
case file and the line of the sample's block as ``file`` and ``line``; ignored samples are
``<skipped>``. The gates are one more suite, ``gates``, where a failed gate is a failure. Times are
evaluation durations, so the file shows where the adapter spent its time.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ..results import Gate, SampleResult, Status, TrialResult
from ..summary import Counts, RunSummary
from .locations import Locations, relative_path
from .tables import compact, time_label

#: Characters XML 1.0 cannot carry at all (not even escaped), and lone surrogates, which UTF-8
#: cannot encode; adapters may return any of them.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class JunitContext:
    """What the report needs beyond the summary, all as text already relative to the reader."""

    locations: Locations
    #: Directory the ``file`` attributes are relative to (the cwd of the run).
    base: str
    #: How the review command names the eval directory (relative to ``base`` where possible).
    eval_dir: str
    #: Extra ``<property>`` pairs of the gates suite (baseline comparison counts).
    properties: Sequence[tuple[str, str]] = ()
    #: Whole-second digits testcase names are padded to (set from the results when rendering).
    time_width: int = 1


def _text(value: str) -> str:
    return _INVALID_XML.sub("\N{REPLACEMENT CHARACTER}", value)


def _seconds(value: float) -> str:
    # Three decimals, no exponent: the XSD's SUREFIRE_TIME pattern.
    return f"{max(value, 0.0):.3f}"


def review_command(eval_dir: str, result: SampleResult) -> str:
    return (f"python -m glasskit_eval review --eval-dir {shlex.quote(eval_dir)} "
            f"--case {shlex.quote(result.case)} --target {shlex.quote(result.target)} "
            f"--time {time_label(result.timestamp_s)}")


def sample_name(result: SampleResult, width: int = 1) -> str:
    """``target @ 0007.500s``: zero-padded to ``width`` digits, so viewers that sort testcases by
    name list them in time order."""
    return f"{result.target} @ {result.timestamp_s:0{width + 4}.3f}s"


def time_width(results: Iterable[SampleResult]) -> int:
    """Digits of the largest whole second among ``results``."""
    return max((len(str(int(r.timestamp_s))) for r in results), default=1)


def failure_body(result: SampleResult, eval_dir: str) -> str:
    lines = [f"expected: {compact(result.expected)}"]
    if result.field is not None:
        lines.append(f"field: {result.field}")
    lines.append(f"observed: {compact(result.observed_value)}")
    if result.frame_index is not None:
        media = ("" if result.media_timestamp_s is None
                 else f" (media time {time_label(result.media_timestamp_s)}s)")
        lines.append(f"frame: {result.frame_index}{media}")
    if result.clip is not None:
        first, last = result.clip.timestamps[0], result.clip.timestamps[-1]
        lines.append(f"clip frames: {', '.join(map(str, result.clip.frame_indexes))} "
                     f"({len(result.clip.frame_indexes)} frames, {time_label(first)}s to {time_label(last)}s)")
    lines.append(f"reason: {result.reason}")
    if result.artifact_image is not None:
        lines.append(f"saved frame: {result.artifact_image}")
    lines.append(f"review: {review_command(eval_dir, result)}")
    if result.traceback:
        lines += ["", result.traceback.rstrip("\n")]
    return "\n".join(lines) + "\n"


def _counts_attrs(element: ET.Element, counts: Counts, time: float) -> None:
    element.set("tests", str(counts.evaluated + counts.ignored + counts.not_evaluated))
    element.set("failures", str(counts.failed))
    element.set("errors", str(counts.errors))
    element.set("skipped", str(counts.ignored + counts.not_evaluated))
    element.set("time", _seconds(time))


def _testcase(suite: ET.Element, result: SampleResult, context: JunitContext) -> None:
    classname = result.case if result.arm is None else f"{result.arm}.{result.case}"
    case = ET.SubElement(suite, "testcase", name=_text(sample_name(result, context.time_width)),
                         classname=_text(classname))
    where = context.locations.get(result.key)
    if where is not None:
        case.set("file", _text(relative_path(where.path, context.base)))
        if where.line is not None:
            case.set("line", str(where.line))
    case.set("time", _seconds(result.evaluation_duration_seconds or 0.0))
    if result.status is Status.FAILED:
        failure = ET.SubElement(case, "failure", message=_text(result.reason), type="mismatch")
        failure.text = _text(failure_body(result, context.eval_dir))
    elif result.status is Status.ERROR:
        kind = result.error_kind.value if result.error_kind is not None else "adapter"
        error = ET.SubElement(case, "error", message=_text(result.reason), type=f"{kind}_error")
        error.text = _text(failure_body(result, context.eval_dir))
    elif result.status in (Status.IGNORED, Status.NOT_EVALUATED):
        ET.SubElement(case, "skipped", message=_text(result.reason))


def _trial_suites(root: ET.Element, trial: TrialResult, many: bool, context: JunitContext) -> None:
    groups: dict[tuple[str | None, str, str], list[SampleResult]] = {}
    for result in trial.results:
        groups.setdefault((result.arm, result.case, result.target), []).append(result)
    for (arm, case_name, target), results in groups.items():
        # A run with arms: each arm's suites of its own, named after it.
        name = (f"{arm}: " if arm is not None else "") + f"{case_name} / {target}" + (
            f" [trial {trial.trial}]" if many else "")
        suite = ET.SubElement(root, "testsuite", name=_text(name))
        counts = Counts.of(results)
        _counts_attrs(suite, counts, sum(r.evaluation_duration_seconds or 0.0 for r in results))
        where = context.locations.get(results[0].key)
        if where is not None:
            suite.set("file", _text(relative_path(where.path, context.base)))
        for result in sorted(results, key=lambda r: (r.timestamp_s, r.sample_index)):
            _testcase(suite, result, context)


def _gates(summary: RunSummary) -> list[tuple[str, Gate]]:
    many = len(summary.run.trials) > 1
    out = [(f"{g.name} [trial {t.trial}]" if many else g.name, g)
           for t in summary.run.trials for g in t.gates]
    out += [(g.name, g) for g in summary.run.gates]
    return out


def _call_properties(summary: RunSummary) -> list[tuple[str, str]]:
    """The run's pass-rate interval, latency percentiles and usage sums."""
    total = summary.total
    out = []
    interval = summary.pass_rate_ci
    if interval is not None:
        out += [("pass_rate_ci.low", f"{interval.low:.6f}"), ("pass_rate_ci.high", f"{interval.high:.6f}"),
                ("pass_rate_ci.level", f"{interval.level:g}"),
                ("pass_rate_ci.effective_samples", f"{interval.effective_samples:.2f}")]
    latency = total.latency
    if latency is not None:
        out += [(f"latency.{name}_s", f"{value:.6f}") for name, value in
                (("p50", latency.p50), ("p90", latency.p90), ("p95", latency.p95), ("max", latency.max))]
    out += [(f"usage.{key}", f"{value:g}") for key, value in total.usage]
    if total.retried:
        out.append(("retried_samples", str(total.retried)))
    return out


def render_junit(summary: RunSummary, context: JunitContext) -> str:
    """The whole document, ending in a newline."""
    root = ET.Element("testsuites", name="glasskit_eval")
    context = replace(context, time_width=time_width(r for t in summary.run.trials for r in t.results))
    many = len(summary.run.trials) > 1
    for trial in summary.run.trials:
        _trial_suites(root, trial, many, context)
    from .streams import junit_stream_suites

    stream_tests, stream_failures = junit_stream_suites(root, summary, context.locations, context.base, _text)
    gates = _gates(summary)
    failed = sum(1 for _name, g in gates if not g.passed)
    suite = ET.SubElement(root, "testsuite", name="gates", tests=str(len(gates)), failures=str(failed),
                          errors="0", skipped="0", time=_seconds(0.0))
    from .early_stop import decided_lines

    measured = [*context.properties, *_call_properties(summary), *(("decided_early", line) for line in decided_lines(summary))]
    if measured:
        properties = ET.SubElement(suite, "properties")
        for name, value in measured:
            ET.SubElement(properties, "property", name=_text(name), value=_text(value))
    for name, gate in gates:
        case = ET.SubElement(suite, "testcase", name=_text(name), classname="gates", time=_seconds(0.0))
        if not gate.passed:
            failure = ET.SubElement(case, "failure", message=_text(gate.message), type="gate")
            failure.text = _text(gate.message) + "\n"
    total = summary.total
    root.set("tests", str(total.evaluated + total.ignored + total.not_evaluated + len(gates) + stream_tests))
    root.set("failures", str(total.failed + failed + stream_failures))
    root.set("errors", str(total.errors))
    root.set("skipped", str(total.ignored + total.not_evaluated))
    root.set("time", _seconds(total.duration_total))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
