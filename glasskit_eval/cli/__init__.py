"""The command line's face: argparse only, and the one place errors become exit codes.

What lives here: each command's ``add_<cmd>`` (its options) and ``run_<cmd>`` (options to a
call of its body in ``commands/``), grouped by kind: ``evals`` (run, seed, validate,
list-samples, export-frames), ``reports`` (report, compare, merge-reports) and ``tools`` (review,
agreement, video-store, build-zipapp); the option plumbing they share (``options``), the help epilogues
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
    from typing import TextIO


# --- entry points ----------------------------------------------------------------------

#: Every command, in the order of `--help`: its name, the function that adds its options and handler,
#: its one-line help and its description.
COMMANDS: tuple[tuple[str, Callable[[argparse.ArgumentParser], None], str, str], ...] = (
    ("run", add_run, "decode frames, call the adapter, compare, apply gates and report",
     "Decode selected frames, call the adapter, compare observations, "
     "apply quality gates, and report results."),
    ("seed", add_seed, "propose expectations for draft samples with an adapter",
     "Run a labeling adapter and write proposed expectations into the "
     "selected draft samples (all selected samples with --replace). Case files keep "
     "their comments and formatting outside the edited sample blocks."),
    ("validate", add_validate, "check eval structure, videos, sample times and optional adapter",
     "Check an eval directory without evaluating samples. With --adapter or "
     "--adapter-command, also construct and close that adapter."),
    ("list-samples", add_list_samples, "print the expanded sample schedule",
     "Print the expanded sample schedule for inspection or debugging."),
    ("export-frames", add_export_frames, "export the exact eval frames at case timestamps",
     "Export the exact display-oriented frames an adapter would get, as "
     "lossless PNGs named at-<timestamp>s.png; with --target, a clip sample's frames "
     "as at-<timestamp>s-frame-<index>.png."),
    ("build-zipapp", add_build_zipapp, "build a single-file, reproducible zipapp of glasskit_eval",
     "Build OUTPUT.pyz, run with `python OUTPUT.pyz <command> ...`. The "
     "same sources give the same bytes. A plain archive needs pyyaml, pillow and av "
     "in the Python that runs it; --include-deps also packs this environment's "
     "copies, so the archive runs on its own on the same Python version and platform."),
    ("video-store", add_video_store, "pull, upload, and prune cached videos in cloud object storage",
     "Manage case videos stored in AWS S3, Cloudflare R2, or another "
     "S3-compatible store (video_stores in <eval-dir>/config.yaml). Downloads are "
     "content-addressed and used only after their declared SHA-256 verifies; set "
     "GLASSKIT_EVAL_CACHE_DIR to move the per-user cache."),
    ("review", add_review, "open the local browser UI to check and correct timed expectations",
     "Serve a local page (127.0.0.1 only, opened through a one-time login file) "
     "with the exact eval frames, a timeline and an editor. Edits are saved to the case "
     "file at once, keeping its comments and formatting outside the edited blocks."),
    ("report", add_report, "render JSON run reports (shards merge) as one HTML page",
     "Render one or more --output-json reports as one self-contained HTML "
     "page, without the adapter. Several reports (shards) merge trial by trial. "
     "Thumbnails of failed frames come from --save-failures artifacts and, with "
     "--eval-dir and the videos present, from decoding the recorded frames."),
    ("compare", add_compare, "compare two run reports sample by sample",
     "Compare two --output-json reports (ours or upstream's), matching samples "
     "by case, target and time: pass->fail, fail->pass, error and observed-value changes, "
     "added and removed samples, and whether the pass rate really dropped (a paired test "
     "that counts neighbouring frames' correlation). Exits 1 when B regressed: by default "
     "on any pass->fail or new error, with --fail-on-regression significant only on a "
     "significant drop."),
    ("merge-reports", add_merge_reports, "merge the reports of `run --shard` jobs and apply the gates",
     "Check that shard reports come from one eval and options and cover every "
     "selected sample exactly once, then recompute summaries, stability and gates as one "
     "unsharded run would. Exits 0 when every gate passed, 1 otherwise."),
    ("agreement", add_agreement, "how far two labellers of the same samples agree",
     "Compare the labels of two eval directories (or two case files) that label "
     "the same samples: per target and overall, percent agreement and Cohen's kappa with its "
     "interval (Fleiss, Cohen & Everitt's large-sample standard error), and for numeric "
     "targets the share within the target's tolerance. Exits 0, or 2 when the sample sets "
     "differ (naming the first sample only one side labels)."),
)
#: The command each of COMMANDS adds, in the same order.
COMMAND_NAMES = tuple(name for name, _add, _help, _description in COMMANDS)
#: Commands that decode frames by the thousand (see ``support.allocator``).
DECODING_COMMANDS = frozenset({"run", "seed", "export-frames", "review"})


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (``command``) one that knows only that command: a few ms less at start-up."""
    parser = opts.Parser(prog=opts.PROG, description="Turn recorded video into repeatable evals of apps that make "
                     "decisions from images.")
    parser.add_argument("--version", action="version", version=f"glasskit_eval {__version__}")
    opts.env_file_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=opts.Parser)
    for name, add, help_text, description in COMMANDS:
        if command in (None, name):
            add(sub.add_parser(name, help=help_text, description=description))
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
        from ..support.outside import LineGuard

        # A command prints names and outside text: a line of it starting with `::` is never a
        # workflow command unless we write it as one.
        return int(args.handler(args, LineGuard.around(out), LineGuard.around(err)))
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
