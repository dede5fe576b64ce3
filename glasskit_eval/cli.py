"""Command line: argparse only. Each command is an ``add_<cmd>``/``run_<cmd>`` pair.

``main(argv) -> int`` never calls ``sys.exit``; the core never sees argparse.
Heavy imports (av, PIL, asyncio machinery) happen inside ``run_<cmd>`` so that
``--help`` and option errors stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from . import __version__
from .cmdline import options as opts
from .cmdline.reports import add_compare, add_merge_reports, add_report
from .cmdline.tools import add_build_zipapp, add_review, add_video_store
from .errors import CommandStopped, EvalError, ExitCode, UsageError, ValidationError, exit_code_for

# Annotations only: fractions, pathlib and typing cost a noticeable share of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO

PROG = "python -m glasskit_eval"


# --- run -----------------------------------------------------------------------------


def add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="decode frames, call the adapter, compare, apply gates and report",
                       description="Decode selected frames, call the adapter, compare observations, "
                       "apply quality gates, and report results.")
    opts.adapter_options(p, "default: <eval-dir>/adapter.py:create_evaluator")
    opts.code_free_adapter_options(p)
    opts.eval_dir_option(p)
    opts.case_option(p, "only run one case, by filename or stem")
    opts.target_options(p)
    opts.time_options(p)
    p.add_argument("--concurrency", type=opts.positive_int, default=1, metavar="INTEGER",
                   help="maximum concurrent evaluate calls (default: 1)")
    p.add_argument("--repeat", type=opts.positive_int, default=1, metavar="INTEGER",
                   help="number of sequential trials, each with a fresh evaluator (default: 1)")
    opts.call_options(p)
    p.add_argument("--min-pass-rate", type=opts.rate, metavar="FLOAT", help="pass-rate gate from 0.0 to 1.0")
    p.add_argument("--min-target-pass-rate", type=opts.rate, metavar="FLOAT",
                   help="pass-rate gate applied to every selected target")
    p.add_argument("--max-failures", type=opts.nonnegative_int, metavar="INTEGER", help="maximum failed comparisons")
    p.add_argument("--max-flaky-samples", type=opts.nonnegative_int, metavar="INTEGER",
                   help="maximum samples whose status varies across trials (needs --repeat >= 2)")
    p.add_argument("--max-p95-latency", dest="max_p95_latency_s", type=opts.nonnegative_number,
                   metavar="SECONDS", help="gate: the run's p95 evaluation latency (config.yaml: "
                   "thresholds.max_p95_latency_s)")
    p.add_argument("--max-cost", type=opts.nonnegative_number, metavar="NUMBER",
                   help="gate: the run's summed reported cost (config.yaml: thresholds.max_cost)")
    p.add_argument("--keep-going", action="store_true",
                   help="record adapter and comparison errors as results and continue")
    p.add_argument("--verbose", action="store_true", help="print every sample result")
    p.add_argument("--output-json", metavar="PATH", help="write a machine-readable JSON report")
    p.add_argument("--artifacts-dir", metavar="PATH",
                   help="base directory for artifacts (default: <eval-dir>/runs/)")
    p.add_argument("--order", choices=("declaration", "time"), default="declaration",
                   help="call order within a case: target by target in case-file order (default), or "
                   "all targets interleaved by sample time")
    p.add_argument("--save-failures", action="store_true",
                   help="save a JPEG frame and a JSON record for every failed or errored sample")
    p.add_argument("--html", metavar="PATH",
                   help="write a self-contained HTML report with thumbnails of the failed frames")
    p.add_argument("--html-budget-mb", type=opts.nonnegative_int, default=25, metavar="INTEGER",
                   help="size budget of the HTML report's embedded thumbnails; beyond it they link to "
                   "--save-failures artifacts (default: 25)")
    p.add_argument("--keep-checkpoints", type=opts.nonnegative_int, default=10, metavar="INTEGER",
                   help="completed run checkpoints kept in <eval-dir>/runs/checkpoints/ when a run ends; "
                   "older ones are deleted (default: 10; 0 keeps all)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache", nargs="?", const="", default=None, metavar="DIR",
                       help="reuse observations of frames already judged by the same adapter and configs "
                       "(default DIR: $GLASSKIT_EVAL_CACHE_DIR/observations, else the per-user cache)")
    cache.add_argument("--no-cache", action="store_true", help="do not use the observation cache (default)")
    p.add_argument("--cache-mode", choices=("read", "write", "readwrite"), default=None,
                   help="read: only reuse; write: only record fresh observations; readwrite (default): both")
    p.add_argument("--cache-max-mb", type=opts.positive_int, default=None, metavar="INTEGER",
                   help="prune the observation cache to this size after the run, least recently used "
                   "first (default: 512)")
    p.add_argument("--strict-pins", action="store_true",
                   help="frames that no longer match <case>.frames.lock are errors, not warnings")
    p.add_argument("--resume", metavar="PATH",
                   help="resume an incomplete run checkpoint by its printed path or id; restores the "
                   "original adapter and options, so it cannot be combined with other options "
                   "(except --output-json, to write the report elsewhere)")
    opts.checkpoint_dir_option(p)
    opts.allow_empty_option(p)
    add_ci_options(p)
    p.set_defaults(handler=run_run)


def add_ci_options(p: Any) -> None:
    ci = p.add_argument_group("CI outputs")
    ci.add_argument("--junit-xml", metavar="PATH",
                    help="write a JUnit XML report (one testcase per sample, at its case-file line)")
    ci.add_argument("--annotations", choices=("auto", "github", "none"), default="auto",
                    help="GitHub Actions annotations and job summary (default: auto, on when "
                    "GITHUB_ACTIONS=true)")
    ci.add_argument("--baseline", metavar="PREVIOUS.json",
                    help="compare with a previous --output-json report (ours or upstream's)")
    ci.add_argument("--fail-on-regression", action="store_true",
                    help="add the gate baseline_regressions: no pass->fail, no new errors (needs --baseline)")
    ci.add_argument("--shard", metavar="I/N",
                    help="run part I of N of the selected samples (or `auto` from the CI's parallel-job "
                    "variables); gates are applied by merge-reports")


def run_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .run.command import execute_run
    from .run.request import RunRequest, time_text

    if args.resume is not None:
        return _resume_run(args, out, err)
    if args.max_flaky_samples is not None and args.repeat < 2:
        raise UsageError("--max-flaky-samples needs --repeat of at least 2")
    from .adapters.choose import check_exclusive

    check_exclusive(args.adapter, args.adapter_command, args.adapter_http, args.adapter_exec)
    opts.filters(args).check()
    cache_dir = opts.cache_dir(args)
    request = RunRequest(
        eval_dir=args.eval_dir, adapter=args.adapter, adapter_command=args.adapter_command,
        adapter_config_path=args.adapter_config, case=args.case, targets=tuple(args.target),
        at=tuple(str(t) for t in args.at), from_s=time_text(args.from_s), until_s=time_text(args.until_s),
        concurrency=args.concurrency, repeat=args.repeat, min_pass_rate=args.min_pass_rate,
        min_target_pass_rate=args.min_target_pass_rate, max_failures=args.max_failures,
        max_flaky_samples=args.max_flaky_samples, keep_going=args.keep_going, verbose=args.verbose,
        output_json=args.output_json, artifacts_dir=args.artifacts_dir, save_failures=args.save_failures,
        checkpoint_dir=args.checkpoint_dir, allow_empty=args.allow_empty, html=args.html,
        html_budget_mb=args.html_budget_mb, junit_xml=args.junit_xml, annotations=args.annotations,
        baseline=args.baseline, fail_on_regression=args.fail_on_regression, shard=opts.shard_text(args),
        keep_checkpoints=args.keep_checkpoints, cache_dir=cache_dir, cache_mode=args.cache_mode or "readwrite",
        cache_max_mb=args.cache_max_mb or 512, strict_pins=args.strict_pins, timeout_s=args.timeout_s,
        retries=args.retries, retry_backoff_s=args.retry_backoff_s, max_calls_per_second=args.max_calls_per_second,
        adapter_http=args.adapter_http, adapter_exec=args.adapter_exec,
        max_p95_latency_s=args.max_p95_latency_s, max_cost=args.max_cost, order=args.order)
    return ExitCode.OK if execute_run(request, out, err) else ExitCode.FAILED


#: Options that --resume may be given with: --eval-dir and --checkpoint-dir only say where to look
#: up an id, and --output-json (run) only where the report goes.
_RESUME_COMPATIBLE = {"resume", "eval_dir", "checkpoint_dir", "handler", "command", "output_json", "env_file",
                      "env_file_override"}


def _resume_overrides(args: argparse.Namespace, command: str) -> list[str]:
    """Options given beside --resume (compared with the command's defaults), as the user spelled them."""
    defaults = vars(build_parser(command).parse_args([command]))
    names = {"from_s": "--from", "until_s": "--until"}
    return [names.get(k, "--" + k.replace("_", "-")) for k, v in vars(args).items()
            if k not in _RESUME_COMPATIBLE and v != defaults.get(k)]


def _resume_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .checkpoints.store import resolve
    from .run.command import execute_run

    overrides = _resume_overrides(args, "run")
    if overrides:
        raise UsageError(f"--resume restores the original adapter and run options and cannot be combined "
                         f"with overrides ({', '.join(overrides)}); run `{PROG} run --resume {args.resume}` "
                         "on its own, or start a new run without --resume")
    from pathlib import Path

    passed = execute_run(None, out, err, resume=resolve(args.resume, Path(args.eval_dir),
                                                        opts.checkpoint_dir(args)),
                         output_json=args.output_json)
    return ExitCode.OK if passed else ExitCode.FAILED


# --- validate -------------------------------------------------------------------------


def add_validate(sub: Any) -> None:
    p = sub.add_parser("validate", help="check eval structure, videos, sample times and optional adapter",
                       description="Check an eval directory without evaluating samples. With --adapter or "
                       "--adapter-command, also construct and close that adapter.")
    opts.eval_dir_option(p)
    p.add_argument("--adapter", metavar="TEXT", help="optional Python adapter target to verify")
    p.add_argument("--adapter-command", metavar="TEXT", help="optional process adapter command to verify")
    p.add_argument("--adapter-config", metavar="PATH",
                   help="YAML or JSON object passed to the adapter (default: <eval-dir>/adapter.yaml when present)")
    opts.case_option(p, "only validate one case, by filename or stem")
    opts.target_options(p)
    opts.allow_empty_option(p)
    p.add_argument("--verbose", action="store_true", help="also describe each video (frames, rate, orientation)")
    pins = p.add_mutually_exclusive_group()
    pins.add_argument("--pin", action="store_true",
                      help="write <eval-dir>/cases/<case>.frames.lock: the exact frame (index, timestamp, "
                      "size, pixel hashes) and decoder of each selected sample")
    pins.add_argument("--strict-pins", action="store_true",
                      help="frames that no longer match a case's frames.lock are errors, not warnings")
    p.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .plan.validate import validate

    opts.check_adapter_options(args)
    report = validate(args.eval_dir, opts.filters(args), allow_empty=args.allow_empty, adapter=args.adapter,
                      adapter_command=args.adapter_command, adapter_config=args.adapter_config,
                      describe_videos=args.verbose, stderr=err, pin=args.pin, strict_pins=args.strict_pins)
    for line in report.lines():
        print(line, file=out)
    return ExitCode.OK if report.passed else ExitCode.FAILED


# --- list-samples ---------------------------------------------------------------------


def add_list_samples(sub: Any) -> None:
    p = sub.add_parser("list-samples", help="print the expanded sample schedule",
                       description="Print the expanded sample schedule for inspection or debugging.")
    opts.eval_dir_option(p)
    opts.case_option(p, "only list one case, by filename or stem")
    opts.target_options(p)
    opts.time_options(p)
    opts.allow_empty_option(p)
    p.set_defaults(handler=run_list_samples)


def run_list_samples(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .plan.listing import list_samples

    print(list_samples(args.eval_dir, opts.filters(args), allow_empty=args.allow_empty), file=out)
    return ExitCode.OK


# --- export-frames --------------------------------------------------------------------


def add_export_frames(sub: Any) -> None:
    p = sub.add_parser("export-frames", help="export the exact eval frames at case timestamps",
                       description="Export the exact display-oriented frames an adapter would get, as "
                       "lossless PNGs named at-<timestamp>s.png.")
    opts.eval_dir_option(p)
    p.add_argument("--case", required=True, metavar="TEXT", help="case filename or stem (required)")
    p.add_argument("--at", action="append", type=opts.time_value, required=True, metavar="FLOAT",
                   help="frame time in seconds (repeatable; duplicates exported once)")
    p.add_argument("--output-dir", metavar="PATH", help="directory for PNGs (default: <eval-dir>/runs/frames/<case>/)")
    p.set_defaults(handler=run_export_frames)


def run_export_frames(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .plan.export import export_frames
    from .store.videos import video_resolver

    resolve = video_resolver(lambda message: print(message, file=err))
    for path in export_frames(args.eval_dir, args.case, args.at, args.output_dir, resolve_video=resolve):
        print(path, file=out)
    return ExitCode.OK


# --- seed -----------------------------------------------------------------------------


def add_seed(sub: Any) -> None:
    p = sub.add_parser("seed", help="propose expectations for draft samples with an adapter",
                       description="Run a labeling adapter and write proposed expectations into the "
                       "selected draft samples (all selected samples with --replace). Case files keep "
                       "their comments and formatting outside the edited sample blocks.")
    opts.adapter_options(p, "default: <eval-dir>/adapter.py:create_evaluator")
    opts.eval_dir_option(p)
    opts.case_option(p, "only seed one case, by filename or stem")
    opts.target_options(p)
    p.add_argument("--concurrency", type=opts.positive_int, default=1, metavar="INTEGER",
                   help="maximum concurrent evaluate calls (default: 1)")
    p.add_argument("--replace", action="store_true",
                   help="also replace existing expectations in the selected scope")
    p.add_argument("--keep-going", action="store_true",
                   help="checkpoint per-sample errors and continue; case files stay unchanged unless "
                   "every selected expectation succeeds")
    p.add_argument("--resume", metavar="PATH",
                   help="resume an incomplete seed checkpoint by its printed path or id")
    opts.checkpoint_dir_option(p)
    p.add_argument("--verbose", action="store_true", help="print every proposed expectation")
    p.set_defaults(handler=run_seed)


def run_seed(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .seed.command import SeedRequest, execute_seed

    opts.check_adapter_options(args)
    if args.resume is not None:
        overrides = _resume_overrides(args, "seed")
        if overrides:
            raise UsageError(f"--resume restores the original adapter and seed options and cannot be "
                             f"combined with overrides ({', '.join(overrides)})")
        done = execute_seed(SeedRequest(eval_dir=args.eval_dir, checkpoint_dir=args.checkpoint_dir), out, err,
                            resume=args.resume)
    else:
        request = SeedRequest(eval_dir=args.eval_dir, adapter=args.adapter,
                              adapter_command=args.adapter_command, case=args.case,
                              targets=tuple(args.target), adapter_config=args.adapter_config,
                              concurrency=args.concurrency, replace=args.replace,
                              keep_going=args.keep_going, verbose=args.verbose,
                              checkpoint_dir=args.checkpoint_dir)
        done = execute_seed(request, out, err)
    return ExitCode.OK if done else ExitCode.FAILED


# --- entry points ----------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (add_run, add_seed, add_validate, add_list_samples, add_export_frames,
                                               add_build_zipapp, add_video_store, add_review, add_report,
                                               add_compare, add_merge_reports)
#: The command each of COMMANDS adds, in the same order.
COMMAND_NAMES = ("run", "seed", "validate", "list-samples", "export-frames", "build-zipapp", "video-store",
                 "review", "report", "compare", "merge-reports")
#: Commands that decode frames by the thousand (see ``support.allocator``).
DECODING_COMMANDS = frozenset({"run", "seed", "export-frames", "review"})


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``command``) one that knows only that command: a few ms less at start-up."""
    parser = opts.Parser(prog=PROG, description="Turn recorded video into repeatable evals of apps that make "
                     "decisions from images.")
    parser.add_argument("--version", action="version", version=f"glasskit_eval {__version__}")
    opts.env_file_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=opts.Parser)
    for name, add in zip(COMMAND_NAMES, COMMANDS, strict=True):
        if command in (None, name):
            add(sub)
            sub.choices[name].teaches = name
    for command_parser in sub.choices.values():
        opts.env_file_options(command_parser)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    arguments = list(sys.argv[1:] if argv is None else argv)
    # A command's parsing and help do not depend on the other commands' parsers.
    parser = build_parser(arguments[0] if arguments and arguments[0] in COMMAND_NAMES else None)
    try:
        # --help and --version print through argparse; send them to our `out`.
        with contextlib.redirect_stdout(out):
            args = parser.parse_args(arguments)
        if args.command is None:
            parser.print_help(out)
            return ExitCode.ERROR
        # Before anything else: adapters, stores and their factories read the environment.
        opts.apply_env_files(args)
        if args.command in DECODING_COMMANDS:
            from .support.allocator import reuse_freed_frames

            reuse_freed_frames()
        return int(args.handler(args, out, err))
    except opts.ParserExit as exc:
        return exc.status
    except CommandStopped as exc:
        for line in exc.lines:
            print(line, file=err)
        return int(exit_code_for(exc))
    except EvalError as exc:
        label = "error" if not isinstance(exc, ValidationError) else "invalid eval"
        print(f"{label}: {exc}", file=err)
        return int(exit_code_for(exc))
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return int(ExitCode.INTERRUPTED)


def console_main() -> int:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` and friends: not an error of ours.
        code = 0
    return code
