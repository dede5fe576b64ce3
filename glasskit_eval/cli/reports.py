"""Commands that read run reports: ``report`` (HTML), ``compare`` and ``merge-reports``."""

from __future__ import annotations

import argparse

from ..errors import ExitCode
from . import options as opts

# Annotations only: typing is a noticeable share of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

# --- compare, merge-reports ------------------------------------------------------------


def add_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", metavar="A.json", help="the earlier report (the baseline)")
    p.add_argument("current", metavar="B.json", help="the later report")
    p.add_argument("--output-json", metavar="PATH", help="write the comparison as JSON")
    opts.regression_options(p, default="any")
    opts.statistics_options(p)
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pathlib import Path

    from ..commands.compare import execute_compare

    passed = execute_compare(Path(args.baseline), Path(args.current), out,
                             output_json=Path(args.output_json) if args.output_json else None,
                             comparison=opts.comparison(args))
    return ExitCode.OK if passed else ExitCode.FAILED


def add_merge_reports(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="SHARD.json", help="the shards' --output-json reports")
    p.add_argument("--output-json", metavar="PATH", help="write the merged report")
    opts.ci_report_options(p)
    p.set_defaults(handler=run_merge_reports)


def run_merge_reports(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.merge_reports import execute_merge_reports

    opts.check_baseline_options(args)
    passed = execute_merge_reports(args.reports, out, output_json=args.output_json, junit_xml=args.junit_xml,
                                   annotations=args.annotations, baseline=args.baseline,
                                   comparison=opts.comparison(args))
    return ExitCode.OK if passed else ExitCode.FAILED


# --- report ---------------------------------------------------------------------------


def add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("reports", nargs="+", metavar="RESULTS.json", help="reports written by run --output-json")
    p.add_argument("--html", required=True, metavar="PATH", help="the HTML file to write")
    p.add_argument("--eval-dir", metavar="PATH",
                   help="eval directory whose videos give thumbnails and clip durations (default: none)")
    p.add_argument("--html-budget-mb", type=opts.nonnegative_int, default=25, metavar="INTEGER",
                   help="size budget of the embedded images (thumbnails first, then full-resolution frames; "
                   "default: 25)")
    p.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pathlib import Path

    from ..commands.report import execute_report

    execute_report([Path(p) for p in args.reports], Path(args.html), out, err,
                   eval_dir=Path(args.eval_dir) if args.eval_dir else None,
                   budget_bytes=args.html_budget_mb * 1000 * 1000)
    return ExitCode.OK
