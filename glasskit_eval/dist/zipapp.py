"""Single-file zipapp archives of glasskit_eval: reproducible builds and the archive's boot step.

Build side (:func:`build_zipapp`): the package files, and with ``include_deps`` the installed
pyyaml, pillow and av of this environment (with their bundled ``*.libs`` and dist-info), go
into a zip whose entries are sorted and carry fixed timestamps and modes, so the same inputs
always give the same bytes. The payload's SHA-256 (the *content hash*) is written into the
generated ``__main__.py`` and the archive metadata.

Run side (:func:`boot`, called by that ``__main__.py`` before the CLI is imported): a plain
archive only checks that pyyaml, pillow and av can be found (without importing them, which
would cost more than the whole ``--help``) and says exactly what to install when one is
missing. An archive with dependencies extracts them once per user and content hash into a
cache directory, under a file lock and via a temporary directory renamed into place, so
concurrent first runs and interrupted extractions never leave a half-written cache behind.

This module is imported on every start of an archive: keep module-level imports to ``os``
and ``sys``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__

#: (import name, distribution name, requirement) of every runtime dependency, in the
#: order messages list them. ``tests/test_dist_zipapp.py`` keeps them equal to pyproject.toml.
REQUIREMENTS: tuple[tuple[str, str, str], ...] = (
    ("yaml", "pyyaml", "pyyaml>=6.0"),
    ("PIL", "pillow", "pillow>=10.0"),
    ("av", "av", "av>=12.0"),
)

METADATA_NAME = "glasskit_eval_zipapp.json"
DEPS_DIR = "_deps"
PACKAGE_DIR = "glasskit_eval"
CACHE_ENV = "GLASSKIT_EVAL_CACHE_DIR"
DEFAULT_INTERPRETER = "/usr/bin/env python3"
FORMAT_VERSION = 1

#: Zip's epoch: the earliest timestamp the format can store.
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)
#: Install-time records that differ between installs of the same wheel (direct_url.json
#: holds a local path); leaving them out keeps builds reproducible across machines.
_SKIP_DIST_INFO = frozenset({"direct_url.json", "INSTALLER", "REQUESTED"})


# --- build ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str
    data: bytes
    executable: bool = False

    @property
    def mode(self) -> int:
        return 0o755 if self.executable else 0o644


@dataclass(frozen=True)
class BuildResult:
    path: Path
    content_hash: str
    size: int
    include_deps: bool
    platform: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"Built {self.path} ({self.size / 1e6:.1f} MB)", f"Content hash: {self.content_hash}"]
        if self.include_deps:
            deps = ", ".join(f"{d['name']} {d['version']}" for d in self.platform["dependencies"])
            lines.append(f"Bundled: {deps}")
            lines.append(f"Runs on: {_describe_python(self.platform['python'])} on "
                         f"{self.platform['platform']} only")
        else:
            lines.append("Needs in the running Python: " + " ".join(r[2] for r in REQUIREMENTS))
        return "\n".join(lines)


def current_platform() -> dict[str, str]:
    """What compiled dependencies are bound to: the interpreter ABI and the OS/CPU."""
    return {"python": sys.implementation.cache_tag or sys.implementation.name,
            "platform": f"{sys.platform}-{_machine()}"}


def package_entries() -> list[Entry]:
    from ..support.resources import walk

    return [Entry(f"{PACKAGE_DIR}/{name}", node.read_bytes()) for name, node in walk()]


def dependency_entries() -> tuple[list[Entry], list[dict[str, Any]]]:
    """The installed files of every runtime dependency, under ``_deps/``, and what they are."""
    from importlib import metadata

    from ..errors import UsageError

    entries: list[Entry] = []
    described: list[dict[str, Any]] = []
    for _module, dist_name, requirement in REQUIREMENTS:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise UsageError(f"--include-deps packs the installed {dist_name}, but {sys.executable} "
                             f"has none; install it with: {sys.executable} -m pip install "
                             f"'{requirement}'") from None
        files = dist.files
        if files is None:
            raise UsageError(f"cannot list the installed files of {dist_name} (no RECORD in its "
                             f"metadata); reinstall it with: {sys.executable} -m pip install "
                             f"--force-reinstall '{requirement}'")
        tags: list[str] = []
        for file in files:
            parts = file.parts
            if not parts or parts[0] == ".." or "__pycache__" in parts or file.suffix in (".pyc", ".pyo"):
                continue  # scripts outside site-packages and interpreter caches
            if parts[0].endswith(".dist-info") and file.name in _SKIP_DIST_INFO:
                continue
            located = Path(str(file.locate()))
            try:
                data = located.read_bytes()
                executable = bool(located.stat().st_mode & 0o111)
            except OSError as exc:
                raise UsageError(f"cannot read {located} of the installed {dist_name}: "
                                 f"{exc.strerror or exc}; reinstall it") from None
            entries.append(Entry(f"{DEPS_DIR}/{file.as_posix()}", data, executable))
            if parts[0].endswith(".dist-info") and file.name == "WHEEL":
                tags = [line.split(":", 1)[1].strip() for line in data.decode("utf-8", "replace").splitlines()
                        if line.startswith("Tag:")]
        described.append({"name": dist_name, "version": dist.version, "tags": sorted(tags)})
    return entries, described


def content_hash(entries: Iterable[Entry]) -> str:
    import hashlib

    total = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.name):
        total.update(entry.name.encode("utf-8") + b"\0" + oct(entry.mode).encode() + b"\0")
        total.update(hashlib.sha256(entry.data).digest())
    return total.hexdigest()


def main_source(digest: str, include_deps: bool, platform: dict[str, str]) -> str:
    return (
        "# Generated by `python -m glasskit_eval build-zipapp`; do not edit.\n"
        "from glasskit_eval.dist.zipapp import boot\n\n"
        f"boot(__file__, content_hash={digest!r}, include_deps={include_deps!r},\n"
        f"     python={platform.get('python', '')!r}, platform={platform.get('platform', '')!r})\n\n"
        "from glasskit_eval.cli import console_main\n\n"
        "raise SystemExit(console_main())\n"
    )


def build_zipapp(output: str | Path, *, include_deps: bool = False,
                 interpreter: str | None = DEFAULT_INTERPRETER, compresslevel: int = 6) -> BuildResult:
    """Write a reproducible zipapp of this package to ``output`` (atomically) and describe it."""
    import hashlib
    import json

    entries = package_entries()
    metadata: dict[str, Any] = {"format": FORMAT_VERSION, "glasskit_eval": __version__,
                                "include_deps": include_deps}
    platform: dict[str, Any] = {}
    if include_deps:
        dep_entries, described = dependency_entries()
        entries += dep_entries
        platform = {**current_platform(), "dependencies": described}
        metadata.update(platform)
        metadata["files"] = {e.name[len(DEPS_DIR) + 1:]: [hashlib.sha256(e.data).hexdigest(), e.mode]
                             for e in dep_entries}
    digest = content_hash(entries)
    metadata["content_hash"] = digest
    entries.append(Entry("__main__.py", main_source(digest, include_deps, platform).encode("utf-8")))
    entries.append(Entry(METADATA_NAME, (json.dumps(metadata, indent=1, sort_keys=True) + "\n").encode()))
    path = Path(output).expanduser()
    if not path.exists() or path.is_file():  # not /dev/stdout and friends: they are written through
        path = path.resolve()
    _write_archive(path, sorted(entries, key=lambda e: e.name), interpreter, compresslevel)
    return BuildResult(path, digest, path.stat().st_size, include_deps, platform)


def _write_archive(path: Path, entries: list[Entry], interpreter: str | None, compresslevel: int) -> None:
    import io
    import zipfile

    from ..support.fsio import write_bytes_atomic

    # Built in memory (45 MB at most, with --include-deps), then written by the one atomic
    # writer, which also writes through to /dev/null or a pipe instead of renaming over it.
    buffer = io.BytesIO()
    if interpreter:
        buffer.write(f"#!{interpreter}\n".encode())
    with zipfile.ZipFile(buffer, "w") as archive:
        for entry in entries:
            info = zipfile.ZipInfo(entry.name, date_time=_FIXED_DATE)
            info.create_system = 3  # Unix, so external_attr carries the mode everywhere
            info.external_attr = (0o100000 | entry.mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entry.data, compresslevel=compresslevel)
    write_bytes_atomic(path, buffer.getvalue(), mode=0o755 if interpreter else 0o644)


def read_metadata(archive: str | Path) -> dict[str, Any]:
    """The metadata an archive was built with (content hash, platform, bundled versions)."""
    import json
    import zipfile

    with zipfile.ZipFile(archive) as zf:
        data: dict[str, Any] = json.loads(zf.read(METADATA_NAME))
    return data


# --- run ----------------------------------------------------------------------------


class BootError(Exception):
    """The archive cannot start here; the message says what to do instead."""


def boot(main_file: str, *, content_hash: str, include_deps: bool, python: str = "",
         platform: str = "") -> None:
    """Make the dependencies importable for an archive's ``__main__``; exit 2 with advice if not."""
    archive = os.path.dirname(os.path.abspath(main_file))
    try:
        if include_deps:
            check_platform(archive, python, platform)
            deps = dependency_path(archive, content_hash)
            if deps not in sys.path:
                sys.path.insert(1 if sys.path else 0, deps)
        missing = missing_requirements()
        if missing:
            raise BootError(missing_message(archive, missing))
    except BootError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def missing_requirements() -> list[str]:
    """Requirements whose top-level module cannot be found (found, not imported: that is slow)."""
    from importlib.util import find_spec

    return [requirement for module, _dist, requirement in REQUIREMENTS if find_spec(module) is None]


def missing_message(archive: str, missing: list[str]) -> str:
    names = ", ".join(r.split(">", 1)[0] for r in missing)
    quoted = " ".join(f"'{r}'" for r in missing)
    return (f"{os.path.basename(archive)} needs {names} in the Python that runs it ({sys.executable}).\n"
            f"Install with: {sys.executable} -m pip install {quoted}\n"
            "or use an archive built with `python -m glasskit_eval build-zipapp --include-deps`, "
            "which carries them.")


def check_platform(archive: str, python: str, platform: str) -> None:
    here = current_platform()
    if python == here["python"] and platform == here["platform"]:
        return
    raise BootError(
        f"{os.path.basename(archive)} bundles pyyaml, pillow and av compiled for "
        f"{_describe_python(python)} on {platform}, but this is {_describe_python(here['python'])} "
        f"on {here['platform']} ({sys.executable}).\nRun it with the matching Python, build an "
        "archive with this one (`python -m glasskit_eval build-zipapp --include-deps OUT.pyz`), or "
        "use a plain archive and install: " + " ".join(f"'{r[2]}'" for r in REQUIREMENTS))


def cache_root() -> str:
    """Per-user cache for extracted dependencies; ``$GLASSKIT_EVAL_CACHE_DIR`` overrides it."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return os.path.abspath(os.path.expanduser(override))
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(home, "Library", "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(base, "glasskit_eval", "zipapp")


def dependency_path(archive: str, digest: str) -> str:
    """Where this archive's dependencies can be imported from, extracting them on first use."""
    if os.path.isdir(archive):  # the archive was unzipped: use its files in place
        return os.path.join(archive, DEPS_DIR)
    root = cache_root()
    final = os.path.join(root, digest)
    try:
        if _private_dir(root, "the dependency cache") and _private_dir(final, "the unpacked dependencies"):
            return final  # only ever created by a complete, verified rename, and nobody else can write it
        os.makedirs(root, mode=0o700, exist_ok=True)
        _private_dir(root, "the dependency cache")
        with _file_lock(os.path.join(root, f"{digest}.lock")):
            if not _private_dir(final, "the unpacked dependencies"):
                _extract(archive, digest, root, final)
    except OSError as exc:
        raise BootError(f"cannot unpack the bundled dependencies of {archive} into {root}: "
                        f"{exc.strerror or exc}.\nFree some space or point ${CACHE_ENV} at a "
                        "writable directory.") from None
    return final


def _private_dir(path: str, what: str) -> bool:
    """False when ``path`` does not exist; True when only this user can change it; else BootError.

    Code is imported from the cache, so a directory another user could write to (or own)
    would let them run code as whoever starts the archive. Checking owner and mode costs
    two ``lstat`` calls; re-hashing the unpacked files (602 files, 132 MB) on every start
    measured 0.3 s, more than the whole start-up budget, so contents are hashed once, when
    they are unpacked, into a directory only this user can write.
    """
    import stat

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a directory"
    elif hasattr(os, "getuid") and info.st_uid != os.getuid():
        problem = f"is owned by user id {info.st_uid}, not by you ({os.getuid()})"
    elif hasattr(os, "getuid") and info.st_mode & 0o022:
        problem = f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    if problem is None:
        return True
    raise BootError(f"refusing to use {what} at {path}: it {problem}, so its code cannot be trusted.\n"
                    f"Remove it (or `chmod go-w` it if it is yours), or point ${CACHE_ENV} at a "
                    "private directory.")


def _extract(archive: str, digest: str, root: str, final: str) -> None:
    import shutil
    import tempfile
    import zipfile

    prefix = f".{digest[:16]}-"
    for name in os.listdir(root):  # left by a process that died mid-extraction; we hold the lock
        if name.startswith(prefix):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=root)
    try:
        try:
            _unpack(archive, digest, tmp)
        except (KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise BootError(f"{archive} is damaged ({exc}); build or download it again") from None
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _unpack(archive: str, digest: str, into: str) -> None:
    import hashlib
    import json
    import zipfile

    with zipfile.ZipFile(archive) as zf:
        metadata = json.loads(zf.read(METADATA_NAME))
        if metadata.get("content_hash") != digest:
            raise BootError(f"{archive} is damaged (its metadata does not match its "
                            "__main__.py); build or download it again")
        for name, (expected, mode) in sorted(metadata["files"].items()):
            parts = name.split("/")
            if any(p in ("", ".", "..") for p in parts) or ":" in name or "\\" in name:
                raise BootError(f"{archive} lists an unsafe file name {name!r}; refusing to unpack")
            dest = os.path.join(into, *parts)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            check = hashlib.sha256()
            with zf.open(f"{DEPS_DIR}/{name}") as src, open(dest, "wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    check.update(chunk)
                    out.write(chunk)
            if check.hexdigest() != expected:
                raise BootError(f"{archive} is damaged ({DEPS_DIR}/{name} does not match its "
                                "recorded hash); build or download it again")
            os.chmod(dest, mode)


@contextmanager
def _file_lock(path: str) -> Iterator[None]:
    from ..support.fsio import lock_fd, unlock_fd

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        lock_fd(fd, blocking=True)
        try:
            yield
        finally:
            unlock_fd(fd)
    finally:
        os.close(fd)


def _machine() -> str:
    if hasattr(os, "uname"):
        return os.uname().machine.lower()
    import platform

    return platform.machine().lower()


def _describe_python(tag: str) -> str:
    name, _, version = tag.partition("-")
    pretty = {"cpython": "CPython", "pypy": "PyPy"}.get(name, name)
    if version.isdigit() and len(version) >= 2:
        version = f"{version[0]}.{version[1:]}"
    return f"{pretty} {version}".strip()
