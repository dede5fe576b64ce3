"""Which adapter a command talks to: the one place ``--adapter``/``--adapter-command`` become a spec."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import UsageError

if TYPE_CHECKING:  # `validate` checks the options on its start-up path; base costs a few ms
    from .base import AdapterSpec


def check_exclusive(adapter: str | None, adapter_command: str | None, adapter_http: str | None = None,
                    adapter_exec: str | None = None) -> None:
    given = [name for name, value in (("--adapter", adapter), ("--adapter-command", adapter_command),
                                      ("--adapter-http", adapter_http), ("--adapter-exec", adapter_exec))
             if value]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} are mutually exclusive; pick one")


def uses_python(adapter: str | None, adapter_command: str | None, adapter_http: str | None,
                adapter_exec: str | None, adapter_config: Mapping[str, Any] | None) -> bool:
    """Whether the run talks to a Python adapter (the default when nothing else is named)."""
    from ._http import http_section

    return adapter is not None or (adapter_command is None and adapter_http is None and adapter_exec is None
            and http_section(adapter_config) is None)


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


def adapter_spec(adapter: str | None, adapter_command: str | None, eval_dir: Path, stderr: TextIO, *,
                 adapter_http: str | None = None, adapter_exec: str | None = None,
                 adapter_config: Mapping[str, Any] | None = None) -> AdapterSpec:
    """The spec for a command, HTTP or exec adapter, else a Python adapter (default: ``<eval-dir>/adapter.py``).

    A command adapter's stderr is mirrored to ``stderr`` as it arrives. adapter.yaml's
    ``adapter: {type: http}`` selects the HTTP adapter when no other adapter is named.
    """
    check_exclusive(adapter, adapter_command, adapter_http, adapter_exec)
    if adapter_exec is not None:
        from ._exec import ExecAdapterSpec

        return ExecAdapterSpec(adapter_exec)
    if adapter is None and adapter_command is None:
        from ._http import HttpAdapterSpec, HttpConfig, http_section

        section = http_section(adapter_config)
        if adapter_http is not None or section is not None:
            return HttpAdapterSpec(HttpConfig.parse(section or {}, adapter_http))
    if adapter_command is not None:
        from .command import CommandAdapterSpec

        return CommandAdapterSpec(adapter_command, stderr=stderr)
    from .python import PythonAdapterSpec

    return PythonAdapterSpec(python_target(adapter, eval_dir))
