"""Option plumbing shared by the command faces: the parser class, value types, option groups.

Nothing below the face imports it.
"""

from __future__ import annotations

import argparse
import math
import sys

from ..errors import UsageError

# Annotations only: fractions, pathlib and typing cost a noticeable share of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from fractions import Fraction
    from pathlib import Path
    from typing import Any

#: How the help and the messages spell the program.
PROG = "python -m glasskit_eval"


class Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized to the terminal without importing shutil.

    argparse builds a formatter for every ``add_argument`` and asks shutil for the
    terminal width; shutil drags in zlib, bz2 and lzma, a tenth of a bare start.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)


def terminal_columns() -> int:
    """What ``shutil.get_terminal_size().columns`` returns: $COLUMNS, the terminal, or 80."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main`` stays in control."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)
        #: The command whose examples and exit codes end its help (see :mod:`.helptext`).
        self.teaches: str | None = None

    def format_help(self) -> str:
        text = super().format_help()
        if self.teaches is None:
            return text
        from .helptext import epilog

        # Laid out here, not by the formatter: examples keep their lines at any width.
        return f"{text}\n{epilog(self.teaches, terminal_columns() - 2)}\n"

    def error(self, message: str) -> None:  # type: ignore[override]
        hint = suggestion(message, self.option_names())
        hint = f"\n{hint}" if hint else ""
        raise UsageError(f"{self.prog}: {message}{hint}\nRun `{self.prog} --help` for usage.")

    def option_names(self) -> list[str]:
        """This parser's long options and its commands' (argparse reports unknown ones at the top)."""
        names = [o for o in self._option_string_actions if o.startswith("--")]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    if isinstance(sub, Parser):
                        names += sub.option_names()
        return sorted(set(names))

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            print(message, file=sys.stderr, end="")
        raise ParserExit(status)


def suggestion(message: str, options: list[str]) -> str | None:
    """``did you mean 'run'?`` for an unknown command, ``did you mean --min-pass-rate?`` for an option."""
    import difflib
    import re

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        known = re.findall(r"'([^']*)'", choice[2])
        close = difflib.get_close_matches(choice[1], known, n=1, cutoff=0.5)
        return f"did you mean '{close[0]}'?" if close else None
    unknown = re.search(r"unrecognized arguments: (.*)", message)
    if not unknown:
        return None
    hints = []
    for word in unknown[1].split():
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
            if close:
                hints.append(f"{word.split('=', 1)[0]}: did you mean {close[0]}?")
    return "\n".join(hints) or None


class ParserExit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


# --- option value parsers --------------------------------------------------------


def time_value(text: str) -> Fraction:
    from ..support.timevalues import parse_cli_time

    try:
        value = parse_cli_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a nonnegative time in seconds, got {text}")
    return value


def _integer(text: str, minimum: int, rule: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {rule}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _integer(text, 1, "greater than zero")


def jitter_frames(text: str) -> int:
    value = _integer(text, 1, "greater than zero")
    if value > 30:
        raise argparse.ArgumentTypeError(f"must be at most 30 (frames either side), got {value}")
    return value


def nonnegative_int(text: str) -> int:
    return _integer(text, 0, "nonnegative")


def _number(text: str, ok: Callable[[float], bool], rule: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not ok(value):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
    return value


def rate(text: str) -> float:
    return _number(text, lambda v: 0.0 <= v <= 1.0, "from 0.0 to 1.0")


def open_fraction(text: str) -> float:
    return _number(text, lambda v: 0.0 < v < 1.0, "a number between 0 and 1 (exclusive)")


def positive_number(text: str) -> float:
    return _number(text, lambda v: v > 0, "a number greater than zero")


def pace(text: str) -> float:
    from ..support.timevalues import MAX_PACE, MIN_PACE

    return _number(text, lambda v: MIN_PACE <= v <= MAX_PACE, f"from {MIN_PACE:g} to {MAX_PACE:g}")


def nonnegative_number(text: str) -> float:
    return _number(text, lambda v: v >= 0, "a nonnegative number")


def perturb_chain(text: str) -> str:
    """A ``--perturb`` value, checked now (before any video is probed) and kept as given for the manifest."""
    from ..arms.spec import parse_chain

    try:
        parse_chain(text)
    except UsageError as exc:
        # argparse names the option already.
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--perturb ")) from None
    return text


# --- shared option groups --------------------------------------------------------


def eval_dir_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--eval-dir", default="eval", metavar="PATH", help="eval directory (default: eval)")


def case_option(p: argparse.ArgumentParser, help_text: str = "only this case, by filename or stem") -> None:
    p.add_argument("--case", metavar="TEXT", help=help_text)


def target_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", default=[], metavar="TEXT",
                   help="only this target id (repeat for several); must exist in the selected cases")


def time_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--at", action="append", type=time_value, default=[], metavar="FLOAT",
                   help="only samples scheduled at this time in seconds (repeatable; needs --case)")
    p.add_argument("--from", dest="from_s", type=time_value, metavar="FLOAT",
                   help="only samples at or after this time (needs --case)")
    p.add_argument("--until", dest="until_s", type=time_value, metavar="FLOAT",
                   help="only samples before this time (needs --case)")


def adapter_options(p: argparse.ArgumentParser, default_help: str) -> None:
    p.add_argument("--adapter", metavar="TEXT", help=f"Python adapter <module-or-file>:<callable> ({default_help})")
    p.add_argument("--adapter-command", metavar="TEXT",
                   help="NDJSON process adapter command, e.g. \"node eval/adapter.mjs\" (no shell)")
    p.add_argument("--adapter-config", metavar="PATH",
                   help="YAML or JSON object passed to the adapter (default: <eval-dir>/adapter.yaml when present)")


def code_free_adapter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adapter-http", metavar="URL",
                   help="POST each sample as JSON to this URL and take the response as the observation "
                   "(more settings: adapter.yaml `adapter: {type: http, ...}`)")
    p.add_argument("--adapter-exec", metavar="\"CMD ARGS\"",
                   help="run this command once per sample: request JSON on stdin, observation JSON on stdout")


def call_options(p: argparse.ArgumentParser) -> None:
    """Timeouts, retries and the rate limit of adapter calls (adapters/resilient.py)."""
    calls = p.add_argument_group("adapter calls")
    calls.add_argument("--timeout", dest="timeout_s", type=positive_number, metavar="SECONDS",
                       help="cancel an adapter call after this long and record a `timeout` error "
                       "(batch calls: x batch size, at most 600 s; default: config.yaml run.timeout_s, else none)")
    calls.add_argument("--retries", type=nonnegative_int, default=0, metavar="INTEGER",
                       help="retry transient failures (timeouts, TransientError, transient command-adapter "
                       "errors, HTTP 408/429/5xx) up to this many times (default: 0)")
    calls.add_argument("--retry-backoff", dest="retry_backoff_s", type=nonnegative_number, default=1.0,
                       metavar="SECONDS", help="base of the exponential full-jitter backoff between attempts, "
                       "doubled per attempt up to 60 s; a retry_after/Retry-After is honoured (default: 1)")
    calls.add_argument("--max-calls-per-second", type=positive_number, metavar="RATE",
                       help="start at most this many adapter calls per second across the whole run")


def gate_options(p: argparse.ArgumentParser) -> None:
    """The gates ``run`` sets; each dest is a field of ``commands.requests.Gates``, built by :func:`group`."""
    gates = p.add_argument_group("gates (each one given wins over its config.yaml key)")
    gates.add_argument("--min-pass-rate", type=rate, metavar="FLOAT", help="pass-rate gate from 0.0 to 1.0")
    gates.add_argument("--min-target-pass-rate", type=rate, metavar="FLOAT",
                       help="pass-rate gate applied to every selected target")
    gates.add_argument("--max-failures", type=nonnegative_int, metavar="INTEGER", help="maximum failed comparisons")
    gates.add_argument("--max-flaky-samples", type=nonnegative_int, metavar="INTEGER",
                       help="maximum samples whose status varies across trials (needs --repeat >= 2)")
    gates.add_argument("--max-p95-latency", dest="max_p95_latency_s", type=nonnegative_number,
                       metavar="SECONDS", help="gate: the run's p95 evaluation latency (config.yaml: "
                       "thresholds.max_p95_latency_s)")
    gates.add_argument("--max-cost", type=nonnegative_number, metavar="NUMBER",
                       help="gate: the run's summed reported cost (config.yaml: thresholds.max_cost)")
    gates.add_argument("--min-recall", type=rate, metavar="FLOAT",
                       help="gate: each stream target's recall, 0.0 to 1.0 (gate <target>_min_recall)")
    gates.add_argument("--max-false-alarms-per-min", type=nonnegative_number, metavar="NUMBER",
                       help="gate: each stream target's false alarms per minute of quiet time")
    gates.add_argument("--max-detection-latency-p95", dest="max_detection_latency_p95_s", type=nonnegative_number,
                       metavar="SECONDS", help="gate: each stream target's p95 detection latency")


def env_file_options(p: argparse.ArgumentParser) -> None:
    """``--env-file``, accepted by every command (and before the command name)."""
    p.add_argument("--env-file", dest="env_file", action="append", default=argparse.SUPPRESS, metavar="PATH",
                   help="read environment variables from this dotenv file first (repeatable; later files "
                   "win; variables already set win unless --env-file-override)")
    p.add_argument("--env-file-override", action="store_true", default=argparse.SUPPRESS,
                   help="let --env-file values replace variables already in the environment")


def apply_env_files(args: argparse.Namespace) -> None:
    """Load ``--env-file`` files into the environment, before the command does anything."""
    files = getattr(args, "env_file", None)
    override = bool(getattr(args, "env_file_override", False))
    if not files:
        if override:
            raise UsageError("--env-file-override needs --env-file PATH")
        return
    from ..support.dotenv import load_env_files

    load_env_files(files, override=override)


def allow_empty_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-empty", action="store_true", help="allow evals or cases with no samples")


def filters(args: argparse.Namespace) -> Any:
    from ..plan.schedule import Filters

    return Filters(case=args.case, targets=tuple(args.target), at=tuple(getattr(args, "at", []) or ()),
                   from_s=getattr(args, "from_s", None), until_s=getattr(args, "until_s", None))


def check_adapter_options(args: argparse.Namespace) -> None:
    from ..adapters.choose import check_exclusive

    check_exclusive(args.adapter, args.adapter_command)


def checkpoint_dir_option(p: argparse.ArgumentParser) -> None:
    import os

    p.add_argument("--checkpoint-dir", metavar="PATH", default=os.environ.get("GLASSKIT_EVAL_CHECKPOINT_DIR") or None,
                   help="directory for checkpoints, e.g. when the eval directory is read-only (default: "
                   "$GLASSKIT_EVAL_CHECKPOINT_DIR, else <eval-dir>/runs/checkpoints)")


def checkpoint_dir(args: argparse.Namespace) -> Path | None:
    from pathlib import Path

    return Path(args.checkpoint_dir).expanduser() if args.checkpoint_dir else None


# --- options to request values ------------------------------------------------


def group(kind: Any, args: argparse.Namespace, **given: Any) -> Any:
    """The request group ``kind`` (a ``commands.requests`` dataclass) from its options' dests.

    Each field is the option whose dest has its name, unless ``given`` holds it (a value the face
    resolves first, such as an absolute path), so a new option of a group needs no line here.
    """
    from dataclasses import fields

    return kind(**{f.name: given[f.name] if f.name in given else getattr(args, f.name) for f in fields(kind)})


def comparison(args: argparse.Namespace) -> Any:
    """The baseline options as the bodies take them (a ``commands.requests.Comparison``)."""
    from ..commands.requests import Comparison

    return group(Comparison, args)


def check_baseline_options(args: argparse.Namespace) -> None:
    for given, name in ((args.fail_on_regression, "--fail-on-regression"),
                        (args.fail_on_latency_regression_s is not None, "--fail-on-latency-regression")):
        if given and args.baseline is None:
            raise UsageError(f"{name} needs --baseline PREVIOUS.json")


def shard_text(args: argparse.Namespace) -> str | None:
    """``--shard`` as ``I/N``; ``auto`` is resolved now, so a resume runs the same part."""
    check_baseline_options(args)
    if args.shard is None:
        return None
    import os

    from ..plan.shard import parse_shard, shard_from_env

    if args.baseline is not None:
        raise UsageError("--baseline compares whole runs; pass it to merge-reports instead of to each shard")
    if args.output_json is None:
        raise UsageError("--shard needs --output-json PATH: merge-reports merges the shards' JSON reports")
    shard = shard_from_env(os.environ) if args.shard == "auto" else parse_shard(args.shard)
    return str(shard)


def cache_dir(args: argparse.Namespace) -> str | None:
    """The observation cache directory the run options ask for, absolute; None when off."""
    if args.cache is None:
        if args.cache_mode is not None or args.cache_max_mb is not None:
            raise UsageError("--cache-mode and --cache-max-mb need --cache")
        return None
    from pathlib import Path

    from ..evaluation.observation_store import default_observation_dir

    return str((Path(args.cache).expanduser() if args.cache else default_observation_dir()).resolve())


def ci_report_options(p: Any) -> Any:
    """``--junit-xml``, ``--annotations``, ``--baseline`` and ``--fail-on-regression`` (run, merge-reports)."""
    ci = p.add_argument_group("CI outputs")
    ci.add_argument("--junit-xml", metavar="PATH",
                    help="write a JUnit XML report (one testcase per sample, at its case-file line)")
    ci.add_argument("--annotations", choices=("auto", "github", "none"), default="auto",
                    help="GitHub Actions annotations and job summary (default: auto, on when "
                    "GITHUB_ACTIONS=true)")
    ci.add_argument("--baseline", metavar="PREVIOUS.json",
                    help="compare with a previous --output-json report (ours or upstream's)")
    regression_options(ci)
    statistics_options(ci)
    return ci


def regression_options(p: Any, default: str | None = None) -> None:
    """``--fail-on-regression [any|significant]`` and ``--fail-on-latency-regression SECONDS``."""
    p.add_argument("--fail-on-regression", nargs="?", const="any", default=default, choices=("any", "significant"),
                   metavar="any|significant",
                   help="gate on the baseline: `any` (the default when given alone) fails on any pass->fail or "
                   "new error (gate baseline_regressions); `significant` only on a drop of the pass rate that "
                   "is significant at --alpha (gate baseline_significant_regression)")
    p.add_argument("--fail-on-latency-regression", dest="fail_on_latency_regression_s", type=nonnegative_number,
                   metavar="SECONDS", help="gate baseline_latency_regression: fail when the median latency change "
                   "against the baseline is above SECONDS even at the low end of its interval")


def statistics_options(p: Any) -> None:
    """``--confidence`` of every interval and ``--alpha`` of every test."""
    p.add_argument("--confidence", type=open_fraction, default=0.95, metavar="FLOAT",
                   help="confidence level of the pass-rate and comparison intervals (default: 0.95)")
    p.add_argument("--alpha", type=open_fraction, default=0.05, metavar="FLOAT",
                   help="false-alarm rate of the regression test against a baseline, across its targets; "
                   "with --early-stop, the chance that any early decision is wrong (default: 0.05)")


def arm_options(p: Any) -> Any:
    """``--arm``, ``--perturb``, ``--control``, ``--seed``, ``--gate-arm``, ``--max-robustness-drop``,
    ``--max-blind-pass-rate``, ``--jitter-frames``."""
    arms = p.add_argument_group("arms (side-by-side comparison on the same frames)")
    arms.add_argument("--arm", dest="arm", action="append", default=None, metavar="NAME[=CONFIG]",
                      help="also run this arm: a name config.yaml `arms:` declares, `all` of them, `control` (the "
                      "plain adapter, when --control names another arm), or NAME=CONFIG.yaml for the plain "
                      "adapter with that config; repeatable")
    arms.add_argument("--perturb", action="append", default=None, type=perturb_chain, metavar="SPEC",
                      help="also run the plain adapter on perturbed frames, as an arm named SPEC: jpeg:Q, blur:R, "
                      "brightness:F, contrast:F, noise:SIGMA, downscale:F, occlude:F, rotate:DEG, chained "
                      "with '+'; blind (no value): blank, mean, shuffle; repeatable")
    arms.add_argument("--control", metavar="NAME",
                      help="the arm every other arm is compared with (default: the plain adapter, `control`)")
    arms.add_argument("--seed", type=int, default=0, metavar="INTEGER",
                      help="seed of the perturbations' random choices and of --early-stop's block order "
                      "(default: 0)")
    arms.add_argument("--gate-arm", metavar="NAME",
                      help="only this arm's gates decide the run (default: every arm's)")
    arms.add_argument("--max-robustness-drop", type=rate, metavar="FLOAT",
                      help="gate max_robustness_drop: fail when a perturbation arm's pass rate is more than this "
                      "below the control's and the drop is significant at --alpha")
    arms.add_argument("--max-blind-pass-rate", type=rate, metavar="FLOAT",
                      help="gate blind_pass_rate: fail when a blind arm (--perturb blank, mean or shuffle) still "
                      "passes more than this share of the samples the control passes: the adapter is not looking")
    arms.add_argument("--jitter-frames", type=jitter_frames, default=0, metavar="K",
                      help="also evaluate the control arm (the plain adapter without arms) on the K frames either "
                      "side of each sample's frame and list the samples whose verdict flips (labels on a knife "
                      "edge); these calls count in no pass rate or gate")
    return arms
