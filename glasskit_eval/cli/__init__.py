"""The command line's face: argparse only, and the one place errors become exit codes.

What lives here: each command's ``add_<cmd>`` (its options) and ``run_<cmd>`` (options to a
call of its body in ``commands/``), grouped by kind: ``evals`` (run, seed, validate,
list-samples, export-frames), ``reports`` (report, compare, merge-reports) and ``tools`` (review,
video-store, build-zipapp); the option plumbing they share (``options``), the help epilogues
(``helptext``), the parser, and :func:`main`. What it may not know: how a
command does its work. The bodies never see argparse.

The start-up rule, stated once: only this face must stay light. ``--help``, ``--version`` and
option errors import nothing heavy (av, PIL, yaml, asyncio; ``tests/test_startup.py`` guards it),
so every ``run_<cmd>`` imports its body inside the function. Code below the face imports normally.

``main(argv) -> int`` never calls ``sys.exit``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from .. import __version__
from ..errors import CommandStopped, EvalError, ExitCode, ValidationError, exit_code_for
from . import options as opts
from .evals import add_export_frames, add_list_samples, add_run, add_seed, add_validate
from .reports import add_compare, add_merge_reports, add_report
from .tools import add_agreement, add_build_zipapp, add_review, add_video_store

# Annotations only: fractions, pathlib and typing cost a noticeable share of `--help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO


# --- entry points ----------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (add_run, add_seed, add_validate, add_list_samples, add_export_frames,
                                               add_build_zipapp, add_video_store, add_review, add_report,
                                               add_compare, add_merge_reports, add_agreement)
#: The command each of COMMANDS adds, in the same order.
COMMAND_NAMES = ("run", "seed", "validate", "list-samples", "export-frames", "build-zipapp", "video-store",
                 "review", "report", "compare", "merge-reports", "agreement")
#: Commands that decode frames by the thousand (see ``support.allocator``).
DECODING_COMMANDS = frozenset({"run", "seed", "export-frames", "review"})


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``command``) one that knows only that command: a few ms less at start-up."""
    parser = opts.Parser(prog=opts.PROG, description="Turn recorded video into repeatable evals of apps that make "
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
    from ..support.secretvalues import RedactingStream, secrets_scope

    with secrets_scope():
        # Every line we print passes here, whoever made its text (an adapter's exception, a
        # server's error body): known secrets are cut at the last moment.
        return _main(argv, RedactingStream.around(out or sys.stdout), RedactingStream.around(err or sys.stderr))


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
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
            from ..support.allocator import reuse_freed_frames

            reuse_freed_frames()
        return int(args.handler(args, out, err))
    except opts.ParserExit as exc:
        return exc.status
    except CommandStopped as exc:
        from ..support.outside import guard_lines

        for line in exc.lines:
            print(guard_lines(line), file=err)
        return int(exit_code_for(exc))
    except EvalError as exc:
        from ..support.outside import guard_lines

        label = "error" if not isinstance(exc, ValidationError) else "invalid eval"
        # Messages quote adapters and servers (an error body, a command adapter's answer).
        print(guard_lines(f"{label}: {exc}"), file=err)
        return int(exit_code_for(exc))
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return int(ExitCode.INTERRUPTED)
    except (MemoryError, RuntimeError) as exc:
        # Whatever ran out (frames are named where they are decoded and encoded), not a traceback:
        # under an address-space limit a thread's stack cannot be mapped either.
        if isinstance(exc, RuntimeError) and not str(exc).startswith("can't start new thread"):
            raise
        # The loop's shutdown starts a thread too: when that fails, the error it masks is the one to tell.
        cause = exc.__context__
        if isinstance(cause, EvalError):
            from ..support.outside import guard_lines

            print(guard_lines(f"error: {cause}"), file=err)
            return int(exit_code_for(cause))
        print("error: out of memory; free memory or raise the process's memory limit (ulimit -v), "
              "lower --concurrency, or use smaller videos", file=err)
        return int(ExitCode.ERROR)
    except ModuleNotFoundError as exc:
        message = _missing_dependency(exc)
        if message is None:
            raise
        print(f"error: {message}", file=err)
        return int(ExitCode.ERROR)


#: Our runtime dependencies: the module a missing import names, and what pip installs.
_DEPENDENCIES = {"yaml": "pyyaml", "PIL": "pillow", "av": "av"}


def _missing_dependency(exc: ModuleNotFoundError) -> str | None:
    """The pip command for a runtime dependency this Python lacks (as the zipapp says it), or None."""
    top = (exc.name or "").split(".")[0]
    if top not in _DEPENDENCIES:
        return None
    from importlib.util import find_spec

    def absent(module: str) -> bool:
        try:
            return find_spec(module) is None
        except (ImportError, ValueError):  # ValueError: blocked in sys.modules
            return True

    missing = [dist for module, dist in _DEPENDENCIES.items() if module == top or absent(module)]
    return (f"glasskit_eval needs {', '.join(missing)} in the Python that runs it ({sys.executable}).\n"
            f"Install with: {sys.executable} -m pip install {' '.join(missing)}")


def console_main() -> int:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` and friends: not an error of ours.
        code = 0
    return code
