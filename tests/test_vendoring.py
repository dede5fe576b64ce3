"""Vendoring: a copy of the ``glasskit_eval/`` folder works from any directory on ``sys.path``."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "glasskit_eval"
DEMO = ROOT / "fixtures" / "demo" / "eval"
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def vendor(into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    shutil.copytree(PACKAGE, into / "glasskit_eval", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


def demo_copy(tmp: Path) -> Path:
    """The demo eval in tmp: a run writes checkpoints under <eval-dir>/runs/."""
    target = tmp / "demo-eval"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    return target


def isolated(code: str, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """-E -s: no PYTHON* variables (so no PYTHONPATH to a checkout) and no user site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([sys.executable, "-E", "-s", "-c", code, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_inside_the_package_are_relative(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        assert not [n for n in names if n.split(".")[0] == "glasskit_eval"], f"{path}:{node.lineno}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_package_files_are_not_located_through_dunder_file(path: Path) -> None:
    # Inside a zipapp there is no directory to join with; glasskit_eval.support.resources reads
    # package data through importlib.resources instead.
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "__file__"]


def test_every_package_directory_is_a_regular_package() -> None:
    # Namespace packages are neither found by setuptools' package discovery nor by zipimport.
    missing = [str(d.relative_to(ROOT)) for d in sorted({p.parent for p in SOURCES})
               if not (d / "__init__.py").exists()]
    assert missing == []


def test_vendored_copy_runs_the_demo_eval_isolated(tmp_path: Path) -> None:
    lib = vendor(tmp_path / "lib")
    report = tmp_path / "report.json"
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import glasskit_eval\n"
            "assert glasskit_eval.__file__.startswith(sys.argv[1]), glasskit_eval.__file__\n"
            "from glasskit_eval.cli import main\n"
            "raise SystemExit(main(['run', '--eval-dir', sys.argv[2], '--output-json', sys.argv[3]]))\n")
    proc = isolated(code, lib, demo_copy(tmp_path), report, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Pass rate: 100.0%" in proc.stdout
    assert json.loads(report.read_text())["summary"]["passed_attempts"] == 12


def test_vendored_under_another_package_name(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    vendor(lib / "thirdparty")
    (lib / "thirdparty" / "__init__.py").write_text("")
    frames = tmp_path / "frames"
    # Import every module under the new name, run commands, and check that nothing
    # anywhere imported a top-level ``glasskit_eval``.
    code = ("import sys, pkgutil, importlib; sys.path.insert(0, sys.argv[1])\n"
            "import thirdparty.glasskit_eval as pkg\n"
            "for info in pkgutil.walk_packages(pkg.__path__, 'thirdparty.glasskit_eval.'):\n"
            "    if not info.name.endswith('.__main__'):  # __main__ runs the CLI by design\n"
            "        importlib.import_module(info.name)\n"
            "from thirdparty.glasskit_eval.cli import main\n"
            "assert main(['validate', '--eval-dir', sys.argv[2]]) == 0\n"
            "assert main(['export-frames', '--eval-dir', sys.argv[2], '--case', 'kitchen', '--at', '2.5',\n"
            "             '--output-dir', sys.argv[3]]) == 0\n"
            "rc = main(['run', '--eval-dir', sys.argv[2]])\n"
            "leaked = sorted(m for m in sys.modules if m.split('.')[0] == 'glasskit_eval')\n"
            "assert not leaked, leaked\n"
            "raise SystemExit(rc)\n")
    proc = isolated(code, lib, demo_copy(tmp_path), frames, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (frames / "at-2.5s.png").is_file()
    assert "Validation passed" in proc.stdout and "Pass rate: 100.0%" in proc.stdout


def test_vendored_package_runs_with_dash_m(tmp_path: Path) -> None:
    lib = vendor(tmp_path / "lib" / "thirdparty")
    (lib / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(tmp_path / "lib")
    proc = subprocess.run([sys.executable, "-s", "-m", "thirdparty.glasskit_eval", "--version"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("glasskit_eval ")
