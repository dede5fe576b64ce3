"""Fast start: importing the CLI, --help and --version load none of av, PIL, asyncio or yaml, and
`validate` loads nothing of what only evaluating, reporting or pinning needs.

Those cost more than everything else a bare start does; commands import them when they
need them. Checked in fresh interpreters, since this test process has them all loaded.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"av", "PIL", "asyncio", "yaml"}


def python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_importing_the_cli_loads_no_heavy_module(tmp_path: Path) -> None:
    proc = python("-c", "import sys, json, glasskit_eval.cli, glasskit_eval.dist.zipapp, glasskit_eval.errors\n"
                  "print(json.dumps(sorted(sys.modules)))", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert heavy(set(json.loads(proc.stdout))) == []


def test_building_the_parser_loads_no_heavy_module(tmp_path: Path) -> None:
    # Option types and defaults are resolved while parsing: parse every command's --help.
    code = ("import argparse, sys, json, contextlib, io\n"
            "from glasskit_eval.cli import build_parser, main\n"
            "sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))\n"
            "names = list(sub.choices)\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    codes = [main([n, '--help']) for n in names]\n"
            "print(json.dumps({'names': names, 'codes': codes, 'modules': sorted(sys.modules)}))")
    proc = python("-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert "run" in got["names"] and set(got["codes"]) == {0}
    assert heavy(set(got["modules"])) == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"], ["validate", "--help"]])
def test_python_dash_m_help_loads_no_heavy_module(tmp_path: Path, argv: list[str]) -> None:
    # -X importtime lists every module the real `python -m glasskit_eval ...` process imported.
    proc = python("-X", "importtime", "-m", "glasskit_eval", *argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "glasskit_eval.cli" in imported
    assert heavy(imported) == []


@pytest.mark.parametrize("columns", ["40", "100", "200"])
def test_help_is_laid_out_exactly_as_argparse_would(monkeypatch: pytest.MonkeyPatch, columns: str) -> None:
    # The CLI sizes help without shutil; the text must not change because of that.
    import argparse

    from glasskit_eval import cli
    from glasskit_eval.cli import options

    monkeypatch.setenv("COLUMNS", columns)
    ours = cli.build_parser()
    monkeypatch.setattr(options, "Formatter", argparse.HelpFormatter)
    stock = cli.build_parser()
    assert ours.formatter_class is not stock.formatter_class
    assert ours.format_help() == stock.format_help()
    sub = next(a for a in ours._actions if isinstance(a, argparse._SubParsersAction))
    stock_sub = next(a for a in stock._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        assert parser.format_help() == stock_sub.choices[name].format_help(), name


def test_a_one_command_parser_helps_and_parses_as_the_full_one() -> None:
    # main() builds only the command named first; nothing the user sees may change.
    import argparse

    from glasskit_eval import cli
    from glasskit_eval.cli import options

    def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    full = cli.build_parser()
    assert tuple(subparsers(full)) == cli.COMMAND_NAMES
    for name in cli.COMMAND_NAMES:
        one = cli.build_parser(name)
        assert list(subparsers(one)) == [name]
        assert subparsers(one)[name].format_help() == subparsers(full)[name].format_help()
        argv = [name, "--help"] if name != "video-store" else [name, "pull", "--help"]
        with pytest.raises(options.ParserExit), contextlib.redirect_stdout(io.StringIO()) as one_out:
            one.parse_args(argv)
        with pytest.raises(options.ParserExit), contextlib.redirect_stdout(io.StringIO()) as full_out:
            full.parse_args(argv)
        assert one_out.getvalue() == full_out.getvalue()
    assert vars(cli.build_parser("run").parse_args(["run"])) == vars(full.parse_args(["run"]))


def imported_by(*args: str, cwd: Path) -> set[str]:
    """Every module a fresh ``python -S -X importtime <args>`` imports. ``-S``: without site's
    ``.pth`` hooks, whatever a machine's site-packages import at every start is left out."""
    proc = python("-S", "-X", "importtime", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


#: What ``--help`` imports of glasskit_eval: the face with its help texts, the errors it maps and the
#: secrets it cuts.
HELP_MODULES = {"glasskit_eval", "glasskit_eval.cli", "glasskit_eval.cli.evals", "glasskit_eval.cli.helptext",
                "glasskit_eval.cli.options",
                "glasskit_eval.cli.reports", "glasskit_eval.cli.tools", "glasskit_eval.errors",
                "glasskit_eval.support", "glasskit_eval.support.secretvalues"}


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["validate", "--help"]])
def test_help_imports_the_face_and_what_argparse_needs_no_more(tmp_path: Path, argv: list[str]) -> None:
    # The budget is `python -c pass` plus half: only what argparse itself imports to print help
    # (and __future__, collections.abc and math, for annotations, secrets and option types) may come
    # with the face; typing, threading, urllib.parse, pathlib, fractions and json are imported
    # where they are used.
    argparse_alone = imported_by("-c", "import argparse, runpy\n"
                                 "p = argparse.ArgumentParser(description='d')\n"
                                 "p.add_subparsers().add_parser('c', help='h').add_argument('--a', help='h')\n"
                                 "p.format_help()", cwd=tmp_path)
    imported = imported_by("-m", "glasskit_eval", *argv, cwd=tmp_path)
    ours = {m for m in imported if m.split(".")[0] == "glasskit_eval"}
    assert HELP_MODULES - {"glasskit_eval.cli.helptext"} <= ours <= HELP_MODULES  # helptext: a command's help
    assert sorted(imported - ours - argparse_alone - {"__future__", "collections.abc", "math"}) == []


def test_validate_of_local_videos_loads_no_network_module(tmp_path: Path) -> None:
    # The video store's client (urllib, ssl, certificates) is for cloud videos only: an eval of
    # local files must not pay for it on every `validate` and `run`.
    demo = ROOT / "fixtures" / "demo" / "eval"
    proc = python("-X", "importtime", "-m", "glasskit_eval", "validate", "--eval-dir", str(demo), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "glasskit_eval.commands.validate" in imported
    assert sorted(m for m in imported if m.split(".")[0] in ("ssl", "http")
                  or m.startswith("glasskit_eval.store.s3")) == []


#: What `validate` of local videos never needs, with the commands that do: frames are not decoded
#: beyond the first (Pillow), arms are checked, not applied (hashlib, statistics), no adapter is
#: called (asyncio, concurrent.futures), no pin file, report or checkpoint is read (json and the
#: strict JSON reader), no video store is declared, and no misspelling is suggested (difflib).
VALIDATE_NEVER = {"PIL", "asyncio", "concurrent.futures", "hashlib", "statistics", "difflib", "json",
                  "glasskit_eval.support.strictjson", "glasskit_eval.plan.pinning", "glasskit_eval.plan.pins",
                  "glasskit_eval.evaluation", "glasskit_eval.reports", "glasskit_eval.checkpoints",
                  "glasskit_eval.adapters.base", "glasskit_eval.store.config", "glasskit_eval.video.frames"}


def test_validate_of_the_demo_eval_imports_only_what_it_checks(tmp_path: Path) -> None:
    # The budget is the script that imports av and opens the video (benchmarks/bench_startup.py):
    # whatever that script imports too (av's own imports, a machine's .pth hooks) is not counted.
    demo = ROOT / "fixtures" / "demo" / "eval"
    video = demo / "cases" / "kitchen.mp4"
    baseline = imported_by_python("-c", "import av, sys; av.open(sys.argv[1]).close()", str(video), cwd=tmp_path)
    imported = imported_by_python("-m", "glasskit_eval", "validate", "--eval-dir", str(demo), cwd=tmp_path)
    assert {"glasskit_eval.commands.validate", "glasskit_eval.cases.armdecl", "glasskit_eval.plan.clips"} <= imported
    extra = imported - baseline
    assert sorted(m for m in extra if any(m == n or m.startswith(n + ".") for n in VALIDATE_NEVER)) == []


def imported_by_python(*args: str, cwd: Path) -> set[str]:
    """Every module a fresh ``python -X importtime <args>`` imports (site and its hooks included)."""
    proc = python("-X", "importtime", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}
