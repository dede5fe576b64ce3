"""The commands around an eval: ``review``, ``agreement``, ``video-store`` and ``build-zipapp``."""

from __future__ import annotations

import argparse

from ..errors import ExitCode, UsageError
from . import options as opts

# Annotations only: typing is a noticeable share of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

# --- review -----------------------------------------------------------------------------


def add_review(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--suspects", action="store_true",
                   help="with --report: open the report's first suspect label and step through them "
                   "(a run with --repeat 2+ or several arms lists them)")
    p.set_defaults(handler=run_review)


def run_review(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.review import ReviewOptions, execute_review

    execute_review(ReviewOptions(eval_dir=args.eval_dir, case=args.case, target=args.target, time=args.time,
                                 port=args.port, report=args.report, suspects=args.suspects), out,
                   open_browser=not args.no_open)
    return ExitCode.OK


# --- agreement --------------------------------------------------------------------------


def add_agreement(p: argparse.ArgumentParser) -> None:
    p.add_argument("first", metavar="A", help="the first labeller's eval directory or case file")
    p.add_argument("second", metavar="B", help="the second labeller's eval directory or case file")
    p.add_argument("--output-json", metavar="PATH", help="write the agreement as JSON")
    p.add_argument("--confidence", type=opts.open_fraction, default=0.95, metavar="FLOAT",
                   help="confidence level of the kappa intervals (default: 0.95)")
    p.set_defaults(handler=run_agreement)


def run_agreement(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pathlib import Path

    from ..commands.agreement import execute_agreement

    execute_agreement(Path(args.first), Path(args.second), out,
                      output_json=Path(args.output_json) if args.output_json else None, confidence=args.confidence)
    return ExitCode.OK


# --- build-zipapp ----------------------------------------------------------------------


def add_build_zipapp(p: argparse.ArgumentParser) -> None:
    p.add_argument("output", metavar="OUTPUT.pyz", help="archive to write (replaced atomically)")
    p.add_argument("--include-deps", action="store_true",
                   help="also pack the installed pyyaml, pillow and av (platform-specific)")
    p.add_argument("--python", default="/usr/bin/env python3", metavar="INTERPRETER",
                   help="interpreter for the archive's #! line (default: /usr/bin/env python3)")
    p.set_defaults(handler=run_build_zipapp)


def run_build_zipapp(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.build_zipapp import execute_build_zipapp

    execute_build_zipapp(args.output, out, include_deps=args.include_deps, interpreter=args.python)
    return ExitCode.OK


# --- video-store ----------------------------------------------------------------------


def add_video_store(p: argparse.ArgumentParser) -> None:
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
    prune.add_argument("--observations", action="store_true",
                       help="prune the observation cache of `run --cache` instead, least recently used "
                       "first down to --max-mb (with --all: empty it)")
    prune.add_argument("--cache", metavar="DIR",
                       help="with --observations: the observation cache (default: as `run --cache`)")
    prune.add_argument("--max-mb", type=opts.nonnegative_int, default=None, metavar="INTEGER",
                       help="with --observations: the size to prune to (default: 512)")
    for nested in (pull, upload, prune):
        opts.env_file_options(nested)
    p.set_defaults(handler=run_video_store, store_parser=p)


def run_video_store(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands import video_store as commands

    if args.store_command == "pull":
        commands.pull(args.eval_dir, args.case, out, err)
    elif args.store_command == "upload":
        commands.upload(args.file, args.store, args.key, args.eval_dir, out)
    elif args.store_command == "prune-cache" and args.observations:
        if args.all and args.max_mb is not None:
            raise UsageError("--all empties the observation cache; drop --max-mb or --all")
        commands.prune_observations(args.cache, args.max_mb, args.all, out)
    elif args.store_command == "prune-cache":
        if args.cache is not None or args.max_mb is not None:
            raise UsageError("--cache and --max-mb apply to --observations")
        commands.prune_cache(args.all, out)
    else:
        args.store_parser.print_help(out)
        return ExitCode.ERROR
    return ExitCode.OK
