"""Which adapter a command talks to: the one place ``--adapter``/``--adapter-command`` become a spec."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..errors import UsageError

if TYPE_CHECKING:  # `validate` checks the options on its start-up path; base costs a few ms
    from .base import AdapterSpec


def check_exclusive(adapter: str | None, adapter_command: str | None) -> None:
    if adapter and adapter_command:
        raise UsageError("--adapter and --adapter-command are mutually exclusive; pick one")


def absolute_adapter(target: str) -> str:
    """``path/to/file.py:factory`` with an absolute path, so a resume finds it from anywhere."""
    module, sep, attr = target.rpartition(":")
    if sep and (module.endswith(".py") or "/" in module or "\\" in module):
        return f"{Path(module).expanduser().resolve()}:{attr}"
    return target


def python_target(adapter: str | None, eval_dir: Path) -> str:
    """The Python adapter target a run stores: the given one or the eval's default, made absolute."""
    from .python import default_target

    return absolute_adapter(adapter or default_target(eval_dir))


def adapter_spec(adapter: str | None, adapter_command: str | None, eval_dir: Path, stderr: TextIO) -> AdapterSpec:
    """The spec for a command adapter, else a Python adapter (default: ``<eval-dir>/adapter.py``).

    A command adapter's stderr is mirrored to ``stderr`` as it arrives.
    """
    check_exclusive(adapter, adapter_command)
    if adapter_command is not None:
        from .process import CommandAdapterSpec

        return CommandAdapterSpec(adapter_command, stderr=stderr)
    from .python import PythonAdapterSpec

    return PythonAdapterSpec(python_target(adapter, eval_dir))
