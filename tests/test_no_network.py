"""No network: with network sockets forbidden in the process, every local command still works.

A ``sitecustomize`` on PYTHONPATH replaces ``socket.socket`` and name resolution with
versions that log the attempt and raise. AF_UNIX stays allowed: asyncio's event loop
wakes itself through a local socket pair, which never leaves the machine. The log
catches attempts the code under test might swallow.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from glasskit_eval.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo" / "eval"

GUARD = textwrap.dedent('''
    import os
    import socket

    _LOG = os.environ["NO_NETWORK_LOG"]
    _Socket = socket.socket


    def _refuse(what):
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(what + "\\n")
        raise OSError(f"network access forbidden in this test: {what}")


    class GuardedSocket(_Socket):
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None and family != socket.AF_UNIX:
                _refuse(f"socket(family={family})")
            super().__init__(family, type, proto, fileno)


    def _no_resolve(*args, **kwargs):
        _refuse(f"name resolution {args[:2]}")


    socket.socket = GuardedSocket
    socket.SocketType = GuardedSocket
    socket.getaddrinfo = _no_resolve
    socket.gethostbyname = _no_resolve
    socket.gethostbyname_ex = _no_resolve
    socket.create_connection = lambda *a, **k: _refuse(f"create_connection {a[:1]}")
''')


@pytest.fixture
def offline(tmp_path: Path) -> tuple[dict[str, str], Path]:
    site = tmp_path / "offline-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "network-attempts.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "NO_NETWORK_LOG": str(log)}
    return env, log


def glasskit(env: dict[str, str], cwd: Path, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "glasskit_eval", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_guard_blocks_network_sockets_and_allows_local_ones(tmp_path: Path,
                                                                 offline: tuple[dict[str, str], Path]) -> None:
    env, log = offline
    code = ("import socket, asyncio\n"
            "a, b = socket.socketpair(); a.close(); b.close()\n"
            "asyncio.run(asyncio.sleep(0))\n"
            "try:\n    socket.socket()\nexcept OSError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "network access forbidden in this test" in proc.stdout
    assert log.read_text() == "socket(family=-1)\n"


def test_run_validate_list_and_export_never_open_a_network_socket(
        tmp_path: Path, offline: tuple[dict[str, str], Path]) -> None:
    env, log = offline
    report, frames = tmp_path / "report.json", tmp_path / "frames"
    demo = tmp_path / "eval"  # a run writes checkpoints under <eval-dir>/runs/
    shutil.copytree(DEMO, demo, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    proc = glasskit(env, tmp_path, "run", "--eval-dir", demo, "--output-json", report,
                    "--save-failures", "--artifacts-dir", tmp_path / "artifacts")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(report.read_text())["summary"]["passed_attempts"] == 12
    assert glasskit(env, tmp_path, "validate", "--eval-dir", demo, "--verbose").returncode == 0
    assert glasskit(env, tmp_path, "list-samples", "--eval-dir", demo).returncode == 0
    proc = glasskit(env, tmp_path, "export-frames", "--eval-dir", demo, "--case", "kitchen",
                    "--at", "0.5", "--at", "3", "--output-dir", frames)
    assert proc.returncode == 0, proc.stderr
    written = sorted(Path(line) for line in proc.stdout.split())
    assert written == sorted(frames.iterdir()) and len(written) == 2
    assert all(p.name.startswith("at-") and p.read_bytes().startswith(b"\x89PNG") for p in written)
    assert not log.exists(), log.read_text()


def _commands() -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


@pytest.mark.skipif("seed" not in _commands(), reason="the seed command is not implemented yet")
def test_seed_never_opens_a_network_socket(tmp_path: Path, offline: tuple[dict[str, str], Path]) -> None:
    env, log = offline
    eval_dir = tmp_path / "eval"
    shutil.copytree(DEMO, eval_dir, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    case = eval_dir / "cases" / "kitchen.yaml"
    labelled = "    - range: [2.0, 4.0]\n      expect: true\n"
    assert labelled in case.read_text()
    case.write_text(case.read_text().replace(labelled, "    - range: [2.0, 4.0]\n"))  # a draft block
    proc = glasskit(env, tmp_path, "seed", "--eval-dir", eval_dir, "--case", "kitchen")
    assert proc.returncode == 0, proc.stderr
    assert glasskit(env, tmp_path, "run", "--eval-dir", eval_dir).returncode == 0
    assert not log.exists(), log.read_text()
