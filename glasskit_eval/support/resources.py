"""Package data, read through ``importlib.resources`` so it works from a folder, a wheel or a zipapp.

Nothing in the package may build paths from ``__file__``: inside a zipapp there is no
directory to build them from. Read data files with :func:`read_bytes` / :func:`read_text`,
or use :func:`as_file` when a real file path is needed (for example to hand a helper
script to a subprocess); it extracts to a temporary file only when it must.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.abc import Traversable

#: The package's own import name; differs from ``glasskit_eval`` when it is vendored
#: inside another package (``thirdparty.glasskit_eval``).
PACKAGE = __name__.rsplit(".", 2)[0]

#: Names that are build by-products, never package data.
_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".pyc", ".pyo")


def package_root() -> Traversable:
    import importlib.resources

    return importlib.resources.files(PACKAGE)


def resource(*parts: str) -> Traversable:
    node = package_root()
    for part in parts:
        node = node.joinpath(part)
    return node


def read_bytes(*parts: str) -> bytes:
    return resource(*parts).read_bytes()


def read_text(*parts: str, encoding: str = "utf-8") -> str:
    return resource(*parts).read_bytes().decode(encoding)


def as_file(*parts: str) -> AbstractContextManager[Path]:
    import importlib.resources

    return importlib.resources.as_file(resource(*parts))


def walk(root: Traversable | None = None) -> Iterator[tuple[str, Traversable]]:
    """Every file of the package as ``(relative/posix/name, node)``, sorted, by-products skipped."""
    yield from _walk(package_root() if root is None else root, "")


def _walk(node: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        name = child.name
        if name.startswith(".") or name in _SKIP_DIRS:
            continue
        if child.is_dir():
            yield from _walk(child, f"{prefix}{name}/")
        elif child.is_file() and not name.endswith(_SKIP_SUFFIXES):
            yield f"{prefix}{name}", child
