"""The console's block of ``--jitter-frames``: samples whose verdict flips within +/-K frames."""

from __future__ import annotations

from typing import TextIO

from ..arms.jitter import JitterReport
from .tables import plural

#: Samples listed on the console, at most (JSON: every one).
JITTER_LINES = 10


def jitter_lines(report: JitterReport) -> list[str]:
    who = f"arm {report.arm}" if report.arm is not None else "the adapter"
    calls = plural(report.calls, "extra call")
    errors = f", {report.errors} failed" if report.errors else ""
    head = (f"Jitter (+/-{plural(report.frames, 'frame')}, {who}, {calls}{errors}; "
            "in no pass rate or gate):")
    if not report.findings:
        return [head, f"  no verdict flips within +/-{report.frames} frames of {report.samples} samples"]
    count = len(report.findings)
    lines = [head, f"  {count} of {report.samples} samples flip (labels on a knife edge):"]
    for finding in report.findings[:JITTER_LINES]:
        frames = ", ".join(str(i) for i in finding.flipped_frames)
        lines.append(f"  {finding.case}/{finding.target} at {finding.timestamp_s:g}s (frame {finding.frame_index}): "
                     f"flips at frame{'s' if len(finding.flipped_frames) != 1 else ''} {frames}")
    if count > JITTER_LINES:
        lines.append(f"  ... and {count - JITTER_LINES} more (JSON: jitter)")
    return lines


def print_jitter(report: JitterReport, out: TextIO) -> None:
    print("", file=out)
    for line in jitter_lines(report):
        print(line, file=out)
