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
from . import options as opts
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
    opts.eval_dir_option(p)
    opts.case_option(p, "only run one case, by filename or stem")
    opts.target_options(p)
    opts.time_options(p)
    p.add_argument("--concurrency", type=opts.positive_int, default=1, metavar="INTEGER",
                   help="maximum concurrent evaluate calls (default: 1)")
    p.add_argument("--repeat", type=opts.positive_int, default=1, metavar="INTEGER",
                   help="number of sequential trials, each with a fresh evaluator (default: 1)")
    p.add_argument("--min-pass-rate", type=opts.rate, metavar="FLOAT", help="pass-rate gate from 0.0 to 1.0")
    p.add_argument("--min-target-pass-rate", type=opts.rate, metavar="FLOAT",
                   help="pass-rate gate applied to every selected target")
    p.add_argument("--max-failures", type=opts.nonnegative_int, metavar="INTEGER", help="maximum failed comparisons")
    p.add_argument("--max-flaky-samples", type=opts.nonnegative_int, metavar="INTEGER",
                   help="maximum samples whose status varies across trials (needs --repeat >= 2)")
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
    p.add_argument("--resume", metavar="PATH",
                   help="resume an incomplete run checkpoint by its printed path or id; restores the "
                   "original adapter and options, so it cannot be combined with other options")
    opts.allow_empty_option(p)
    p.set_defaults(handler=run_run)


def run_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .run.command import execute_run
    from .run.request import RunRequest, time_text

    if args.resume is not None:
        return _resume_run(args, out, err)
    if args.max_flaky_samples is not None and args.repeat < 2:
        raise UsageError("--max-flaky-samples needs --repeat of at least 2")
    opts.check_adapter_options(args)
    opts.filters(args).check()
    request = RunRequest(
        eval_dir=args.eval_dir, adapter=args.adapter, adapter_command=args.adapter_command,
        adapter_config_path=args.adapter_config, case=args.case, targets=tuple(args.target),
        at=tuple(str(t) for t in args.at), from_s=time_text(args.from_s), until_s=time_text(args.until_s),
        concurrency=args.concurrency, repeat=args.repeat, min_pass_rate=args.min_pass_rate,
        min_target_pass_rate=args.min_target_pass_rate, max_failures=args.max_failures,
        max_flaky_samples=args.max_flaky_samples, keep_going=args.keep_going, verbose=args.verbose,
        output_json=args.output_json, artifacts_dir=args.artifacts_dir, save_failures=args.save_failures,
        allow_empty=args.allow_empty, order=args.order)
    return ExitCode.OK if execute_run(request, out, err) else ExitCode.FAILED


#: Options that --resume may be given with: --eval-dir only says where to look up an id.
_RESUME_COMPATIBLE = {"resume", "eval_dir", "handler", "command"}


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

    passed = execute_run(None, out, err, resume=resolve(args.resume, Path(args.eval_dir)))
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
    p.set_defaults(handler=run_validate)


def run_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .plan.validate import validate

    opts.check_adapter_options(args)
    report = validate(args.eval_dir, opts.filters(args), allow_empty=args.allow_empty, adapter=args.adapter,
                      adapter_command=args.adapter_command, adapter_config=args.adapter_config,
                      describe_videos=args.verbose, stderr=err)
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


# --- build-zipapp ----------------------------------------------------------------------


def add_build_zipapp(sub: Any) -> None:
    p = sub.add_parser("build-zipapp", help="build a single-file, reproducible zipapp of glasskit_eval",
                       description="Build OUTPUT.pyz, run with `python OUTPUT.pyz <command> ...`. The "
                       "same sources give the same bytes. A plain archive needs pyyaml, pillow and av "
                       "in the Python that runs it; --include-deps also packs this environment's "
                       "copies, so the archive runs on its own on the same Python version and platform.")
    p.add_argument("output", metavar="OUTPUT.pyz", help="archive to write (replaced atomically)")
    p.add_argument("--include-deps", action="store_true",
                   help="also pack the installed pyyaml, pillow and av (platform-specific)")
    p.add_argument("--python", default="/usr/bin/env python3", metavar="INTERPRETER",
                   help="interpreter for the archive's #! line (default: /usr/bin/env python3)")
    p.set_defaults(handler=run_build_zipapp)


def run_build_zipapp(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .dist.zipapp import build_zipapp

    result = build_zipapp(args.output, include_deps=args.include_deps, interpreter=args.python)
    print(result.describe(), file=out)
    return ExitCode.OK


# --- video-store ----------------------------------------------------------------------


def add_video_store(sub: Any) -> None:
    p = sub.add_parser("video-store", help="pull, upload, and prune cached videos in cloud object storage",
                       description="Manage case videos stored in AWS S3, Cloudflare R2, or another "
                       "S3-compatible store (video_stores in <eval-dir>/config.yaml). Downloads are "
                       "content-addressed and used only after their declared SHA-256 verifies; set "
                       "GLASSKIT_EVAL_CACHE_DIR to move the per-user cache.")
    commands = p.add_subparsers(dest="store_command", metavar="<command>", parser_class=opts.Parser)
    pull = commands.add_parser("pull", help="download and verify the selected cases' cloud videos",
                               description="Download every cloud video referenced by the selected cases "
                               "into the cache, verify its SHA-256 and print each distinct cached path.")
    opts.eval_dir_option(pull)
    opts.case_option(pull, "only download one case's video, by filename or stem")
    upload = commands.add_parser("upload", help="upload a local video and print its case-file block",
                                 description="Upload a local video through the named store's S3 API and "
                                 "print the `video:` block for a case file. An existing object is reused "
                                 "only when its size and SHA-256 match, and never overwritten.")
    upload.add_argument("file", metavar="FILE", help="local video file (.mp4, .mov, .m4v, .webm, .mkv)")
    upload.add_argument("--store", required=True, metavar="NAME", help="video store from config.yaml")
    upload.add_argument("--key", metavar="TEXT", help="object key (default: <sha256><extension>)")
    opts.eval_dir_option(upload)
    prune = commands.add_parser("prune-cache", help="remove stale incomplete downloads (--all: everything)",
                                description="Remove interrupted downloads and stale locks from the "
                                "per-user video cache; --all also removes verified videos.")
    prune.add_argument("--all", action="store_true", help="also remove downloaded videos")
    p.set_defaults(handler=run_video_store, store_parser=p)


def run_video_store(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .store import commands

    if args.store_command == "pull":
        commands.pull(args.eval_dir, args.case, out, err)
    elif args.store_command == "upload":
        commands.upload(args.file, args.store, args.key, args.eval_dir, out)
    elif args.store_command == "prune-cache":
        commands.prune_cache(args.all, out)
    else:
        args.store_parser.print_help(out)
        return ExitCode.ERROR
    return ExitCode.OK


# --- review -----------------------------------------------------------------------------


def add_review(sub: Any) -> None:
    p = sub.add_parser("review", help="open the local browser UI to check and correct timed expectations",
                       description="Serve a local page (127.0.0.1 only, behind a per-launch secret URL) "
                       "with the exact eval frames, a timeline and an editor. Edits are saved to the case "
                       "file at once, keeping its comments and formatting outside the edited blocks.")
    opts.eval_dir_option(p)
    p.add_argument("--case", metavar="TEXT",
                   help="initially open this case, by filename or stem (default: the first case)")
    p.add_argument("--target", metavar="TEXT", help="initially focus this target of --case")
    p.add_argument("--time", type=opts.time_value, metavar="FLOAT", help="initially seek to this time in --case")
    p.add_argument("--port", type=opts.nonnegative_int, default=0, metavar="INTEGER",
                   help="loopback port (default: 0, any free port)")
    p.add_argument("--no-open", action="store_true", help="print the URL without opening a browser")
    p.add_argument("--report", metavar="PATH",
                   help="overlay a run's pass/fail/error markers from its --output-json report")
    p.set_defaults(handler=run_review)


def run_review(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .review import ReviewOptions, start_review
    from .review.server import run

    server = start_review(ReviewOptions(eval_dir=args.eval_dir, case=args.case, target=args.target,
                                        time=args.time, port=args.port, report=args.report))
    run(server, out, open_browser=not args.no_open)
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
        done = execute_seed(SeedRequest(eval_dir=args.eval_dir), out, err, resume=args.resume)
    else:
        request = SeedRequest(eval_dir=args.eval_dir, adapter=args.adapter,
                              adapter_command=args.adapter_command, case=args.case,
                              targets=tuple(args.target), adapter_config=args.adapter_config,
                              concurrency=args.concurrency, replace=args.replace,
                              keep_going=args.keep_going, verbose=args.verbose)
        done = execute_seed(request, out, err)
    return ExitCode.OK if done else ExitCode.FAILED


# --- entry points ----------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (add_run, add_seed, add_validate, add_list_samples, add_export_frames,
                                               add_build_zipapp, add_video_store, add_review)
#: The command each of COMMANDS adds, in the same order.
COMMAND_NAMES = ("run", "seed", "validate", "list-samples", "export-frames", "build-zipapp", "video-store",
                 "review")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``command``) one that knows only that command: a few ms less at start-up."""
    parser = opts.Parser(prog=PROG, description="Turn recorded video into repeatable evals of apps that make "
                     "decisions from images.")
    parser.add_argument("--version", action="version", version=f"glasskit_eval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=opts.Parser)
    for name, add in zip(COMMAND_NAMES, COMMANDS, strict=True):
        if command in (None, name):
            add(sub)
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
