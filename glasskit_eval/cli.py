"""Command line: argparse only. Each command is an ``add_<cmd>``/``run_<cmd>`` pair.

``main(argv) -> int`` never calls ``sys.exit``; the core never sees argparse.
Heavy imports (av, PIL, asyncio machinery) happen inside ``run_<cmd>`` so that
``--help`` and option errors stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .errors import EvalError, ExitCode, UsageError, ValidationError, exit_code_for

PROG = "python -m glasskit_eval"


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main`` stays in control."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}\nRun `{self.prog} --help` for usage.")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            print(message, file=sys.stderr, end="")
        raise _Exit(status)


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


# --- option value parsers --------------------------------------------------------


def _time(text: str) -> Fraction:
    from .timevalues import parse_cli_time

    try:
        value = parse_cli_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a nonnegative time in seconds, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be greater than zero, got {value}")
    return value


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be nonnegative, got {value}")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0.0 to 1.0, got {text}")
    return value


# --- shared option groups --------------------------------------------------------


def _eval_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eval-dir", default="eval", metavar="PATH", help="eval directory (default: eval)")


def _case(p: argparse.ArgumentParser, help_text: str = "only this case, by filename or stem") -> None:
    p.add_argument("--case", metavar="TEXT", help=help_text)


def _targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", default=[], metavar="TEXT",
                   help="only this target id (repeat for several); must exist in the selected cases")


def _times(p: argparse.ArgumentParser) -> None:
    p.add_argument("--at", action="append", type=_time, default=[], metavar="FLOAT",
                   help="only samples scheduled at this time in seconds (repeatable; needs --case)")
    p.add_argument("--from", dest="from_s", type=_time, metavar="FLOAT",
                   help="only samples at or after this time (needs --case)")
    p.add_argument("--until", dest="until_s", type=_time, metavar="FLOAT",
                   help="only samples before this time (needs --case)")


def _adapter(p: argparse.ArgumentParser, default_help: str) -> None:
    p.add_argument("--adapter", metavar="TEXT", help=f"Python adapter <module-or-file>:<callable> ({default_help})")
    p.add_argument("--adapter-command", metavar="TEXT",
                   help="NDJSON process adapter command, e.g. \"node eval/adapter.mjs\" (no shell)")
    p.add_argument("--adapter-config", metavar="PATH",
                   help="YAML or JSON object passed to the adapter (default: <eval-dir>/adapter.yaml when present)")


def _allow_empty(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-empty", action="store_true", help="allow evals or cases with no samples")


def _filters(args: argparse.Namespace) -> Any:
    from .schedule import Filters

    return Filters(case=args.case, targets=tuple(args.target), at=tuple(getattr(args, "at", []) or ()),
                   from_s=getattr(args, "from_s", None), until_s=getattr(args, "until_s", None))


def _adapter_spec(args: argparse.Namespace, eval_dir: Path, *, default: bool) -> Any:
    if args.adapter and args.adapter_command:
        raise UsageError("--adapter and --adapter-command are mutually exclusive; pick one")
    if args.adapter_command is not None:
        from .adapters.process import CommandAdapterSpec

        return CommandAdapterSpec(args.adapter_command)
    if args.adapter is None and not default:
        return None
    from .adapters.python import PythonAdapterSpec, default_target

    return PythonAdapterSpec(args.adapter or default_target(eval_dir))


# --- run -----------------------------------------------------------------------------


def add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="decode frames, call the adapter, compare, apply gates and report",
                       description="Decode selected frames, call the adapter, compare observations, "
                       "apply quality gates, and report results.")
    _adapter(p, "default: <eval-dir>/adapter.py:create_evaluator")
    _eval_dir(p)
    _case(p, "only run one case, by filename or stem")
    _targets(p)
    _times(p)
    p.add_argument("--concurrency", type=_positive_int, default=1, metavar="INTEGER",
                   help="maximum concurrent evaluate calls (default: 1)")
    p.add_argument("--repeat", type=_positive_int, default=1, metavar="INTEGER",
                   help="number of sequential trials, each with a fresh evaluator (default: 1)")
    p.add_argument("--min-pass-rate", type=_rate, metavar="FLOAT", help="pass-rate gate from 0.0 to 1.0")
    p.add_argument("--min-target-pass-rate", type=_rate, metavar="FLOAT",
                   help="pass-rate gate applied to every selected target")
    p.add_argument("--max-failures", type=_nonnegative_int, metavar="INTEGER", help="maximum failed comparisons")
    p.add_argument("--max-flaky-samples", type=_nonnegative_int, metavar="INTEGER",
                   help="maximum samples whose status varies across trials (needs --repeat >= 2)")
    p.add_argument("--keep-going", action="store_true",
                   help="record adapter and comparison errors as results and continue")
    p.add_argument("--verbose", action="store_true", help="print every sample result")
    p.add_argument("--output-json", metavar="PATH", help="write a machine-readable JSON report")
    p.add_argument("--artifacts-dir", metavar="PATH",
                   help="base directory for artifacts (default: <eval-dir>/runs/)")
    p.add_argument("--save-failures", action="store_true",
                   help="save a JPEG frame and a JSON record for every failed or errored sample")
    _allow_empty(p)
    p.set_defaults(handler=run_run)


def run_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.max_flaky_samples is not None and args.repeat < 2:
        raise UsageError("--max-flaky-samples needs --repeat of at least 2")
    import asyncio

    from .evaldir import load_adapter_config
    from .failures import FailureSaver
    from .gates import GateOptions
    from .planning import build_plan
    from .reports.console import ConsoleListener, print_summary
    from .reports.json_report import build_report, write_report
    from .runner import RunAborted, RunOptions, run_trials

    filters = _filters(args)
    plan = build_plan(args.eval_dir, filters, allow_empty=args.allow_empty)
    spec = _adapter_spec(args, plan.eval_dir.root, default=True)
    artifacts = Path(args.artifacts_dir).expanduser().resolve() if args.artifacts_dir else None
    options = RunOptions(
        concurrency=args.concurrency, repeat=args.repeat, keep_going=args.keep_going, verbose=args.verbose,
        gates=GateOptions(args.min_pass_rate, args.min_target_pass_rate, args.max_failures),
        max_flaky_samples=args.max_flaky_samples,
        adapter_config=load_adapter_config(plan.eval_dir.root, args.adapter_config),
        artifacts_dir=artifacts, save_failures=args.save_failures)
    saver = FailureSaver(artifacts or plan.eval_dir.root / "runs") if args.save_failures else None
    listener = ConsoleListener(out, verbose=args.verbose)
    try:
        outcome = asyncio.run(run_trials(plan, spec, options, listener,
                                         save_failures=saver.save_case if saver else None))
    except RunAborted as exc:
        print(f"Eval aborted: {exc}", file=err)
        return ExitCode.ERROR
    print_summary(outcome, out)
    if args.output_json:
        write_report(Path(args.output_json), build_report(outcome))
    return ExitCode.OK if outcome.success else ExitCode.FAILED


# --- validate -------------------------------------------------------------------------


def add_validate(sub: Any) -> None:
    p = sub.add_parser("validate", help="check eval structure, videos, sample times and optional adapter",
                       description="Check an eval directory without evaluating samples. With --adapter or "
                       "--adapter-command, also construct and close that adapter.")
    _eval_dir(p)
    p.add_argument("--adapter", metavar="TEXT", help="optional Python adapter target to verify")
    p.add_argument("--adapter-command", metavar="TEXT", help="optional process adapter command to verify")
    p.add_argument("--adapter-config", metavar="PATH",
                   help="YAML or JSON object passed to the adapter (default: <eval-dir>/adapter.yaml when present)")
    _case(p, "only validate one case, by filename or stem")
    _targets(p)
    _allow_empty(p)
    p.add_argument("--verbose", action="store_true", help="also describe each video (frames, rate, orientation)")
    p.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .planning import build_plan

    if args.adapter and args.adapter_command:
        raise UsageError("--adapter and --adapter-command are mutually exclusive; pick one")
    try:
        plan = build_plan(args.eval_dir, _filters(args), allow_empty=args.allow_empty)
        spec = _adapter_spec(args, plan.eval_dir.root, default=False)
        if spec is not None:
            _check_adapter(spec, plan.eval_dir.root, args)
    except (ValidationError, EvalError) as exc:
        if isinstance(exc, UsageError):
            raise
        print("Validation failed", file=out)
        problems = exc.problems if isinstance(exc, ValidationError) else None
        for line in ([str(p) for p in problems] if problems else [str(exc)]):
            print(f"- {line}", file=out)
        if isinstance(exc, ValidationError) and exc.hint:
            print(exc.hint, file=out)
        return ExitCode.FAILED
    print(f"Validation passed: {plan.eval_dir.root} ({plan.sample_count} samples)", file=out)
    if args.verbose:
        for case_plan in plan.cases:
            if case_plan.video is not None:
                from .video.frames import stream_orientation

                orientation = stream_orientation(case_plan.video_path)
                print(f"  {case_plan.case.name}: {case_plan.video.describe()}, {orientation.describe()}",
                      file=out)
    return ExitCode.OK


def _check_adapter(spec: Any, eval_dir: Path, args: argparse.Namespace) -> None:
    import asyncio

    from .adapters.base import FactoryConfig
    from .errors import AdapterError
    from .evaldir import load_adapter_config

    config = FactoryConfig(eval_dir=eval_dir, config=load_adapter_config(eval_dir, args.adapter_config))

    async def check() -> None:
        evaluator = await spec.create(config)
        await evaluator.close()

    try:
        asyncio.run(check())
    except AdapterError as exc:
        raise AdapterError(f"adapter validation failed: {exc}") from None


# --- list-samples ---------------------------------------------------------------------


def add_list_samples(sub: Any) -> None:
    p = sub.add_parser("list-samples", help="print the expanded sample schedule",
                       description="Print the expanded sample schedule for inspection or debugging.")
    _eval_dir(p)
    _case(p, "only list one case, by filename or stem")
    _targets(p)
    _times(p)
    _allow_empty(p)
    p.set_defaults(handler=run_list_samples)


def run_list_samples(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .planning import build_plan
    from .reports.console import compact, format_list_samples
    from .timevalues import format_time

    plan = build_plan(args.eval_dir, _filters(args), allow_empty=args.allow_empty, check_videos=False)
    rows = []
    for case_plan in plan.cases:
        for s in case_plan.samples:
            declared = s.block.compare
            mode = ""
            if declared is not None:
                mode = declared.mode + (f" ±{declared.tolerance:g}" if declared.tolerance else "")
            rows.append([s.case.name, s.target.id, f"{format_time(s.time)}s",
                         compact(s.expect) if s.block.has_expect else "(draft)", mode, s.field or "",
                         s.block.ignore or "", s.block.source()])
    print(format_list_samples(str(plan.eval_dir.root), rows), file=out)
    return ExitCode.OK


# --- export-frames --------------------------------------------------------------------


def add_export_frames(sub: Any) -> None:
    p = sub.add_parser("export-frames", help="export the exact eval frames at case timestamps",
                       description="Export the exact display-oriented frames an adapter would get, as "
                       "lossless PNGs named at-<timestamp>s.png.")
    _eval_dir(p)
    p.add_argument("--case", required=True, metavar="TEXT", help="case filename or stem (required)")
    p.add_argument("--at", action="append", type=_time, required=True, metavar="FLOAT",
                   help="frame time in seconds (repeatable; duplicates exported once)")
    p.add_argument("--output-dir", metavar="PATH", help="directory for PNGs (default: <eval-dir>/runs/frames/<case>/)")
    p.set_defaults(handler=run_export_frames)


def run_export_frames(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .export import export_frames

    for path in export_frames(args.eval_dir, args.case, args.at, args.output_dir):
        print(path, file=out)
    return ExitCode.OK


# --- entry points ----------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (add_run, add_validate, add_list_samples, add_export_frames)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Turn recorded video into repeatable evals of apps that make "
                     "decisions from images.")
    parser.add_argument("--version", action="version", version=f"glasskit_eval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        # --help and --version print through argparse; send them to our `out`.
        with contextlib.redirect_stdout(out):
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.command is None:
            parser.print_help(out)
            return ExitCode.ERROR
        return int(args.handler(args, out, err))
    except _Exit as exc:
        return exc.status
    except EvalError as exc:
        label = "error" if not isinstance(exc, ValidationError) else "invalid eval"
        print(f"{label}: {exc}", file=err)
        return int(exit_code_for(exc))
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return int(ExitCode.ERROR)


def console_main() -> int:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` and friends: not an error of ours.
        code = 0
    return code
