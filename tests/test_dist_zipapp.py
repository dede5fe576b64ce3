"""build-zipapp: reproducible archives, plain and with bundled dependencies, run as real processes."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest

from glasskit_eval.cli import main
from glasskit_eval.dist import zipapp
from glasskit_eval.dist.zipapp import BootError, Entry, build_zipapp, check_platform, content_hash
from glasskit_eval.support.resources import walk

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo" / "eval"


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def demo_copy(tmp: Path) -> Path:
    """The demo eval in tmp: a run writes checkpoints under <eval-dir>/runs/."""
    target = tmp / "demo-eval"
    if not target.exists():
        shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    return target


def demo_run(interpreter_args: list[str], archive: Path, tmp: Path,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    report = tmp / "report.json"
    proc = run(sys.executable, *interpreter_args, archive, "run", "--eval-dir", demo_copy(tmp),
               "--output-json", report, cwd=tmp, env=env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(report.read_text())["summary"]
    assert summary["passed_attempts"] == 12 and summary["failed_attempts"] == 0
    return proc


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plain") / "glasskit_eval.pyz"
    build_zipapp(out)
    return out


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("bundled") / "glasskit_eval-full.pyz"
    build_zipapp(out, include_deps=True, compresslevel=1)
    yield out
    out.unlink()  # 40+ MB: do not leave it to the tmp_path retention policy


def test_requirements_match_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert sorted(project["dependencies"]) == sorted(r[2] for r in zipapp.REQUIREMENTS)


def test_same_sources_give_the_same_bytes(tmp_path: Path, plain: Path) -> None:
    again = tmp_path / "again.pyz"
    result = build_zipapp(again)
    assert again.read_bytes() == plain.read_bytes()
    with zipfile.ZipFile(again) as zf:
        infos = zf.infolist()
        meta = json.loads(zf.read(zipapp.METADATA_NAME))
        main_py = zf.read("__main__.py").decode()
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.external_attr >> 16 for i in infos} == {0o100644}
    assert meta["content_hash"] == result.content_hash and meta["include_deps"] is False
    assert repr(result.content_hash) in main_py
    assert again.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert os.access(again, os.X_OK)


def test_archive_holds_every_package_file_and_nothing_else(plain: Path) -> None:
    expected = {f"glasskit_eval/{name}": node.read_bytes() for name, node in walk()}
    with zipfile.ZipFile(plain) as zf:
        got = {n: zf.read(n) for n in zf.namelist() if n.startswith("glasskit_eval/")}
        others = {n for n in zf.namelist() if not n.startswith("glasskit_eval/")}
    assert got == expected
    assert others == {"__main__.py", zipapp.METADATA_NAME}
    assert not [n for n in got if "__pycache__" in n or n.endswith(".pyc")]


def test_content_hash_follows_content_not_order() -> None:
    a, b = Entry("x/a.py", b"1"), Entry("x/b.py", b"2")
    assert content_hash([a, b]) == content_hash([b, a])
    assert content_hash([a, b]) != content_hash([a, Entry("x/b.py", b"3")])
    assert content_hash([a, b]) != content_hash([a, Entry("x/b.py", b"2", executable=True)])
    assert content_hash([a, b]) != content_hash([a, Entry("x/c.py", b"2")])


def test_plain_archive_runs_the_demo_eval(tmp_path: Path, plain: Path) -> None:
    demo_run([], plain, tmp_path)


def test_plain_archive_reads_package_data_from_inside_the_zip(tmp_path: Path, plain: Path) -> None:
    code = ("import sys, json; sys.path.insert(0, sys.argv[1])\n"
            "import glasskit_eval; from glasskit_eval.support import resources\n"
            "files = {n: resources.read_bytes(*n.split('/')).hex() for n, _ in resources.walk()}\n"
            "print(json.dumps({'file': glasskit_eval.__file__, 'files': files}))\n")
    proc = run(sys.executable, "-I", "-c", code, plain, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["file"].startswith(str(plain))  # imported from the zip, not from a checkout
    assert got["files"] == {name: node.read_bytes().hex() for name, node in walk()}


def test_plain_archive_without_dependencies_says_what_to_install(tmp_path: Path, plain: Path) -> None:
    # -S: no site-packages, so none of pyyaml, pillow, av can be found.
    proc = run(sys.executable, "-I", "-S", plain, "--help", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{sys.executable} -m pip install 'pyyaml>=6.0' 'pillow>=10.0' 'av>=12.0'" in proc.stderr
    assert "--include-deps" in proc.stderr


def test_plain_archive_names_only_the_missing_dependency(tmp_path: Path, plain: Path) -> None:
    fakes = tmp_path / "fakes"
    for module in ("yaml", "PIL"):
        (fakes / module).mkdir(parents=True)
        (fakes / module / "__init__.py").write_text("")
    proc = run(sys.executable, "-S", plain, "--version", cwd=tmp_path, env={"PYTHONPATH": str(fakes)})
    assert proc.returncode == 2
    assert "needs av in the Python that runs it" in proc.stderr
    assert "pip install 'av>=12.0'\n" in proc.stderr


def test_plain_archive_help_imports_no_heavy_modules(tmp_path: Path, plain: Path) -> None:
    proc = run(sys.executable, "-X", "importtime", plain, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not {m for m in imported if m.split(".")[0] in {"av", "PIL", "asyncio", "yaml"}}


def test_build_zipapp_command(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "sub" / "app.pyz"
    assert main(["build-zipapp", str(target), "--python", "/opt/py/bin/python3"], out=out, err=err) == 0
    assert target.read_bytes().startswith(b"#!/opt/py/bin/python3\n")
    assert f"Built {target}" in out.getvalue() and "Content hash: " in out.getvalue()
    assert [p.name for p in target.parent.iterdir()] == ["app.pyz"]  # no temp file left


def test_build_zipapp_reports_an_unwritable_output(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out, err = io.StringIO(), io.StringIO()
    assert main(["build-zipapp", str(tmp_path / "file" / "app.pyz")], out=out, err=err) == 2
    assert "cannot write" in err.getvalue() and str(tmp_path / "file") in err.getvalue()


def test_bundled_archive_states_its_platform(bundled: Path) -> None:
    with zipfile.ZipFile(bundled) as zf:
        meta = json.loads(zf.read(zipapp.METADATA_NAME))
        names = set(zf.namelist())
        for name, (digest, _mode) in list(meta["files"].items())[:50]:
            assert hashlib.sha256(zf.read(f"_deps/{name}")).hexdigest() == digest
    assert meta["include_deps"] is True
    assert meta["python"] == sys.implementation.cache_tag
    assert meta["platform"] == zipapp.current_platform()["platform"]
    deps = {d["name"]: d for d in meta["dependencies"]}
    assert set(deps) == {"pyyaml", "pillow", "av"}
    for name, dep in deps.items():
        assert dep["version"] == metadata.version(name)
        assert dep["tags"]  # the wheel tags say which interpreters and platforms they fit
    assert {n.split("/")[1] for n in names if n.startswith("_deps/")} >= {"yaml", "PIL", "av"}
    assert not [n for n in names if "__pycache__" in n or n.endswith("direct_url.json")]


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "cache"
    yield path
    shutil.rmtree(path, ignore_errors=True)  # 100+ MB of extracted libraries


def test_bundled_archive_runs_without_site_packages(tmp_path: Path, bundled: Path, cache: Path) -> None:
    digest = zipapp.read_metadata(bundled)["content_hash"]
    (cache / f".{digest[:16]}-stale" / "av").mkdir(parents=True)  # as if an extraction died midway
    # -I -S: no site-packages, no user site, no PYTHONPATH: only the archive's own copies exist.
    demo_run(["-I", "-S"], bundled, tmp_path, env={zipapp.CACHE_ENV: str(cache)})
    assert sorted(p.name for p in cache.iterdir()) == [digest, f"{digest}.lock"]
    extracted = cache / digest
    assert {"yaml", "PIL", "av"} <= {p.name for p in extracted.iterdir()}
    # Later starts reuse the cache.
    before = os.stat(extracted).st_mtime_ns
    demo_run(["-I", "-S"], bundled, tmp_path, env={zipapp.CACHE_ENV: str(cache)})
    assert os.stat(extracted).st_mtime_ns == before


def test_concurrent_first_runs_extract_once(tmp_path: Path, bundled: Path, cache: Path) -> None:
    env = {**os.environ, zipapp.CACHE_ENV: str(cache)}

    def start(_: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-I", "-S", str(bundled), "validate", "--eval-dir", str(DEMO)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)

    with ThreadPoolExecutor(4) as pool:
        procs = list(pool.map(start, range(4)))
    for proc in procs:
        assert proc.returncode == 0, proc.stderr
        assert "Validation passed" in proc.stdout
    names = sorted(p.name for p in cache.iterdir())
    assert len(names) == 2 and names[1] == names[0] + ".lock"  # no temp dirs left behind


def test_bundled_archive_on_another_python_says_what_to_do() -> None:
    with pytest.raises(BootError) as info:
        check_platform("/x/app.pyz", "cpython-39", "linux-x86_64")
    message = str(info.value)
    assert "app.pyz bundles pyyaml, pillow and av compiled for CPython 3.9 on linux-x86_64" in message
    assert "build-zipapp --include-deps" in message and "'av>=12.0'" in message
    check_platform("/x/app.pyz", **zipapp.current_platform())  # the building Python is fine


def test_cache_root_is_per_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(zipapp.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert zipapp.cache_root() == str(tmp_path / "xdg" / "glasskit_eval" / "zipapp")
    monkeypatch.setenv(zipapp.CACHE_ENV, str(tmp_path / "mine"))
    assert zipapp.cache_root() == str(tmp_path / "mine")


def test_pip_installs_the_same_data_files_the_zipapp_carries() -> None:
    # The zipapp packs every file of the package; a wheel only the declared package data.
    import fnmatch

    tomllib = pytest.importorskip("tomllib")
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    declared = patterns["glasskit_eval"]
    data = [name for name, _ in walk() if not name.endswith(".py")]
    assert data, "walk() found no data files at all"

    def matches(name: str, pattern: str) -> bool:  # setuptools globs: `*` stays inside one folder
        parts, globs = name.split("/"), pattern.split("/")
        return len(parts) == len(globs) and all(map(fnmatch.fnmatchcase, parts, globs))

    assert [n for n in data if not any(matches(n, p) for p in declared)] == []


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_dependency_cache_another_user_could_write_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv(zipapp.CACHE_ENV, str(root))
    digest = "d" * 64
    final = root / digest
    final.mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    archive = str(tmp_path / "app.pyz")  # never opened: a trusted cache is used as it is
    assert zipapp.dependency_path(archive, digest) == str(final)

    final.chmod(0o770)
    with pytest.raises(BootError) as info:
        zipapp.dependency_path(archive, digest)
    assert f"the unpacked dependencies at {final}" in str(info.value)
    assert "can be written by other users (mode 770)" in str(info.value)
    final.chmod(0o700)

    root.chmod(0o777)
    with pytest.raises(BootError) as info:
        zipapp.dependency_path(archive, digest)
    assert f"the dependency cache at {root}" in str(info.value) and zipapp.CACHE_ENV in str(info.value)
    root.chmod(0o700)

    final.rmdir()
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir(mode=0o700)
    final.symlink_to(elsewhere)
    with pytest.raises(BootError) as info:
        zipapp.dependency_path(archive, digest)
    assert "is a symbolic link" in str(info.value)
    final.unlink()

    if os.getuid() == 0:  # only root can hand a directory to another user
        final.mkdir(mode=0o700)
        os.chown(final, 65534, 65534)
        with pytest.raises(BootError) as info:
            zipapp.dependency_path(archive, digest)
        assert "is owned by user id 65534, not by you (0)" in str(info.value)
