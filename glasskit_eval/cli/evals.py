"""The faces of the commands that evaluate an eval directory: run, seed, validate, list-samples,
export-frames (``add_<cmd>`` declares the options, ``run_<cmd>`` calls the body)."""

from __future__ import annotations

import argparse

from ..errors import ExitCode, UsageError
from . import options as opts

# Annotations only: fractions, pathlib and typing cost a noticeable share of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

# --- run -----------------------------------------------------------------------------


def add_run(p: argparse.ArgumentParser) -> None:
    opts.adapter_options(p, "default: <eval-dir>/adapter.py:create_evaluator")
    opts.code_free_adapter_options(p)
    opts.eval_dir_option(p)
    opts.case_option(p, "only run one case, by filename or stem")
    opts.target_options(p)
    opts.time_options(p)
    p.add_argument("--concurrency", type=opts.positive_int, default=1, metavar="INTEGER",
                   help="maximum concurrent evaluate calls (default: 1)")
    p.add_argument("--keep-going", action="store_true",
                   help="record adapter and comparison errors as results and continue")
    p.add_argument("--verbose", action="store_true", help="print every sample result")
    # One argparse group per request group (commands.requests): the face builds each from its dests.
    trials = p.add_argument_group("trials")
    trials.add_argument("--repeat", type=opts.positive_int, default=1, metavar="INTEGER",
                        help="number of sequential trials, each with a fresh evaluator (default: 1)")
    trials.add_argument("--order", choices=("declaration", "time"), default="declaration",
                        help="call order within a case: target by target in case-file order (default), or "
                        "all targets interleaved by sample time")
    trials.add_argument("--pace", type=opts.pace, metavar="FLOAT",
                        help="feed stream targets on the paced clock: frames come due at media time / FLOAT "
                        "(1.0 is real time; from 0.01 to 1000), the newest frame wins while the adapter is busy "
                        "(default: replay)")
    opts.call_options(p)
    opts.gate_options(p)
    outputs = p.add_argument_group("outputs")
    outputs.add_argument("--output-json", metavar="PATH", help="write a machine-readable JSON report")
    outputs.add_argument("--artifacts-dir", metavar="PATH",
                         help="base directory for artifacts (default: <eval-dir>/runs/)")
    outputs.add_argument("--save-failures", action="store_true",
                         help="save a JPEG frame and a JSON record for every failed or errored sample")
    outputs.add_argument("--html", metavar="PATH",
                         help="write a self-contained HTML report with thumbnails of the failed frames")
    outputs.add_argument("--html-budget-mb", type=opts.nonnegative_int, default=25, metavar="INTEGER",
                         help="size budget of the HTML report's embedded images (thumbnails first, then "
                         "full-resolution frames); beyond it they link to --save-failures artifacts (default: 25)")
    outputs.add_argument("--keep-checkpoints", type=opts.nonnegative_int, default=10, metavar="INTEGER",
                         help="completed run checkpoints kept in <eval-dir>/runs/checkpoints/ when a run ends; "
                         "older ones are deleted (default: 10; 0 keeps all)")
    cache_group = p.add_argument_group("observation cache")
    cache = cache_group.add_mutually_exclusive_group()
    cache.add_argument("--cache", nargs="?", const="", default=None, metavar="DIR",
                       help="reuse observations of frames already judged by the same adapter and configs "
                       "(default DIR: $GLASSKIT_EVAL_CACHE_DIR/observations, else the per-user cache)")
    cache.add_argument("--no-cache", action="store_true", help="do not use the observation cache (default)")
    cache_group.add_argument("--cache-mode", choices=("read", "write", "readwrite"), default=None,
                             help="read: only reuse; write: only record fresh observations; readwrite (default): "
                             "both")
    cache_group.add_argument("--cache-max-mb", type=opts.positive_int, default=None, metavar="INTEGER",
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
    ci = opts.ci_report_options(p)
    ci.add_argument("--shard", metavar="I/N",
                    help="run part I of N of the selected samples (or `auto` from the CI's or cluster's job "
                    "variables); gates are applied by merge-reports")
    opts.arm_options(p)
    early = p.add_argument_group("early stop (decide a pass-rate gate from part of the samples)")
    early.add_argument("--early-stop", action="store_true",
                       help="evaluate samples in a random order of blocks (seeded by --seed) and stop calling "
                       "the adapter once every pass-rate gate is decided by an anytime-valid bound on the "
                       "whole selection's pass rate, at --alpha across the gates")
    early.add_argument("--early-stop-block", type=opts.time_value, metavar="SECONDS",
                       help="--early-stop's block: the consecutive samples of one target within this many "
                       "seconds of video (default: 0.5)")
    p.set_defaults(handler=run_run, option_defaults=_defaults(p))


def run_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands import requests as rq
    from ..commands.run import execute_run

    if args.resume is not None:
        return _resume_run(args, out, err)
    if args.max_flaky_samples is not None and args.repeat < 2:
        raise UsageError("--max-flaky-samples needs --repeat of at least 2")
    from ..adapters.choose import check_exclusive

    check_exclusive(args.adapter, args.adapter_command, args.adapter_http, args.adapter_exec)
    opts.filters(args).check()
    arms = _arm_options(args)
    arms.check()
    cache_dir = opts.cache_dir(args)
    request = rq.RunRequest(
        eval_dir=args.eval_dir, adapter=args.adapter, adapter_command=args.adapter_command,
        adapter_config_path=args.adapter_config, case=args.case, targets=tuple(args.target),
        concurrency=args.concurrency, keep_going=args.keep_going, verbose=args.verbose,
        checkpoint_dir=args.checkpoint_dir, calls=opts.group(rq.CallOptions, args),
        adapter_http=args.adapter_http, adapter_exec=args.adapter_exec, strict_pins=args.strict_pins,
        selection=opts.group(rq.Selection, args, at=tuple(str(t) for t in args.at),
                             from_s=rq.time_text(args.from_s), until_s=rq.time_text(args.until_s)),
        trials=opts.group(rq.Trials, args), gates=opts.group(rq.Gates, args),
        comparison=opts.comparison(args), ci=opts.group(rq.CiOutputs, args, shard=opts.shard_text(args)),
        outputs=opts.group(rq.Outputs, args),
        cache=rq.CacheOptions(cache_dir, args.cache_mode or "readwrite", args.cache_max_mb or 512), arms=arms,
        early=opts.group(rq.EarlyStop, args, early_stop_block=_early_stop_block(args)))
    return ExitCode.OK if execute_run(request, out, err) else ExitCode.FAILED


def _early_stop_block(args: argparse.Namespace) -> str | None:
    if args.early_stop_block is None:
        return None
    if not args.early_stop:
        raise UsageError("--early-stop-block needs --early-stop")
    if args.early_stop_block <= 0:
        raise UsageError("--early-stop-block must be a positive number of seconds")
    return str(args.early_stop_block)


def _arm_options(args: argparse.Namespace) -> Any:
    """The arms group as the request records it: ``NAME=PATH`` paths made absolute (from the cwd)."""
    from ..commands.requests import ArmOptions, absolute

    arms = []
    for text in args.arm or ():
        name, sep, path = text.partition("=")
        arms.append(f"{name}={absolute(path) if path else ''}" if sep else text)
    return opts.group(ArmOptions, args, arms=tuple(arms), perturb=tuple(args.perturb or ()))


#: Options that --resume may be given with: --eval-dir and --checkpoint-dir only say where to look
#: up an id, --output-json (run) only where the report goes, and --baseline (run) which report to
#: compare with (the recorded one may have moved since).
_RESUME_COMPATIBLE = {"resume", "eval_dir", "checkpoint_dir", "handler", "option_defaults", "command", "output_json",
                      "env_file", "env_file_override", "baseline"}


def _defaults(p: argparse.ArgumentParser) -> dict[str, Any]:
    """Each option's default, to tell which options were given beside ``--resume``."""
    return {action.dest: action.default for action in p._actions}


def _resume_overrides(args: argparse.Namespace) -> list[str]:
    """Options given beside --resume (compared with the command's defaults), as the user spelled them."""
    defaults = args.option_defaults
    names = {"from_s": "--from", "until_s": "--until"}
    return [names.get(k, "--" + k.replace("_", "-")) for k, v in vars(args).items()
            if k not in _RESUME_COMPATIBLE and v != defaults.get(k)]


def _checkpoint(args: argparse.Namespace) -> Any:
    """The checkpoint directory ``--resume`` names (a path, or an id under the checkpoints root)."""
    from pathlib import Path

    from ..checkpoints.store import resolve

    return resolve(args.resume, Path(args.eval_dir).expanduser().resolve(), opts.checkpoint_dir(args))


def _resume_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.run import execute_run

    overrides = _resume_overrides(args)
    if overrides:
        raise UsageError(f"--resume restores the original adapter and run options and cannot be combined "
                         f"with overrides ({', '.join(overrides)}); run `{opts.PROG} run --resume {args.resume}` "
                         "on its own, or start a new run without --resume")

    passed = execute_run(_checkpoint(args), out, err, output_json=args.output_json, baseline=args.baseline)
    return ExitCode.OK if passed else ExitCode.FAILED


# --- validate -------------------------------------------------------------------------


def add_validate(p: argparse.ArgumentParser) -> None:
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
    from ..commands.validate import execute_validate

    opts.check_adapter_options(args)
    passed = execute_validate(args.eval_dir, opts.filters(args), out, err, allow_empty=args.allow_empty,
                              adapter=args.adapter, adapter_command=args.adapter_command,
                              adapter_config=args.adapter_config, describe_videos=args.verbose, pin=args.pin,
                              strict_pins=args.strict_pins)
    return ExitCode.OK if passed else ExitCode.FAILED


# --- list-samples ---------------------------------------------------------------------


def add_list_samples(p: argparse.ArgumentParser) -> None:
    opts.eval_dir_option(p)
    opts.case_option(p, "only list one case, by filename or stem")
    opts.target_options(p)
    opts.time_options(p)
    opts.allow_empty_option(p)
    p.set_defaults(handler=run_list_samples)


def run_list_samples(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.list_samples import execute_list_samples

    execute_list_samples(args.eval_dir, opts.filters(args), out, allow_empty=args.allow_empty)
    return ExitCode.OK


# --- export-frames --------------------------------------------------------------------


def add_export_frames(p: argparse.ArgumentParser) -> None:
    opts.eval_dir_option(p)
    p.add_argument("--case", required=True, metavar="TEXT", help="case filename or stem (required)")
    p.add_argument("--target", metavar="TEXT",
                   help="export this target's samples at the --at times: every frame of a clip sample")
    p.add_argument("--at", action="append", type=opts.time_value, required=True, metavar="FLOAT",
                   help="frame time in seconds (repeatable; duplicates exported once)")
    p.add_argument("--output-dir", metavar="PATH", help="directory for PNGs (default: <eval-dir>/runs/frames/<case>/)")
    p.set_defaults(handler=run_export_frames)


def run_export_frames(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.export_frames import execute_export_frames

    execute_export_frames(args.eval_dir, args.case, args.at, args.output_dir, out, err, target=args.target)
    return ExitCode.OK


# --- seed -----------------------------------------------------------------------------


def add_seed(p: argparse.ArgumentParser) -> None:
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
    opts.call_options(p)
    p.add_argument("--resume", metavar="PATH",
                   help="resume an incomplete seed checkpoint by its printed path or id")
    opts.checkpoint_dir_option(p)
    p.add_argument("--verbose", action="store_true", help="print every proposed expectation")
    p.set_defaults(handler=run_seed, option_defaults=_defaults(p))


def run_seed(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..commands.requests import CallOptions, SeedRequest
    from ..commands.seed import execute_seed

    opts.check_adapter_options(args)
    if args.resume is not None:
        overrides = _resume_overrides(args)
        if overrides:
            raise UsageError(f"--resume restores the original adapter and seed options and cannot be "
                             f"combined with overrides ({', '.join(overrides)})")
        done = execute_seed(_checkpoint(args), out, err)
    else:
        request = SeedRequest(eval_dir=args.eval_dir, adapter=args.adapter,
                              adapter_command=args.adapter_command, case=args.case,
                              targets=tuple(args.target), adapter_config_path=args.adapter_config,
                              concurrency=args.concurrency, replace=args.replace,
                              keep_going=args.keep_going, verbose=args.verbose,
                              checkpoint_dir=args.checkpoint_dir, calls=opts.group(CallOptions, args))
        done = execute_seed(request, out, err)
    return ExitCode.OK if done else ExitCode.FAILED


