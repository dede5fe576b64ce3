"""Errors and exit codes.

The tree::

    EvalError                 anything we report to the user without a traceback
    ├── UsageError            bad option combinations or values (exit 2)
    ├── ValidationError       the eval directory or a case file is invalid; carries Problems
    ├── VideoError            a video is missing, unreadable or too short (exit 2)
    ├── AdapterError          loading, constructing, calling or closing the adapter failed
    │   └── ProtocolError     a command adapter broke the NDJSON protocol
    └── OutputError           a report, frame or artifact could not be written

`exit_code_for` is the one place that maps them to process exit codes. Every
message says what went wrong and, where we can tell, what to do next.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ExitCode(enum.IntEnum):
    #: The command succeeded; for ``run``, every configured gate passed.
    OK = 0
    #: Validation failed, or ``run`` completed but a gate failed.
    FAILED = 1
    #: Usage, setup, config, video or adapter error aborted the command.
    ERROR = 2


@dataclass(frozen=True)
class Problem:
    """One validation finding, located as precisely as the input allows."""

    file: str | None
    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.path:
            where += f": {self.path}"
        return f"{where}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "path": self.path, "line": self.line, "message": self.message}


class EvalError(Exception):
    """Base of every error reported to the user as a message, not a traceback."""

    exit_code: ExitCode = ExitCode.ERROR


class UsageError(EvalError):
    """Options that cannot work together or values out of range."""


class ValidationError(EvalError):
    """An eval directory, config or case file that does not follow the spec."""

    def __init__(self, problems: list[Problem], hint: str | None = None) -> None:
        self.problems = list(problems)
        self.hint = hint
        lines = [str(p) for p in self.problems]
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


class VideoError(EvalError):
    """A video that is missing, cannot be decoded, or is shorter than a sample time."""


class AdapterError(EvalError):
    """The adapter could not be loaded, constructed, called or closed."""


class ProtocolError(AdapterError):
    """A command adapter sent something protocol version 1 does not allow."""


class OutputError(EvalError):
    """A report, exported frame or artifact could not be written."""


def exit_code_for(error: BaseException) -> ExitCode:
    """Map an exception raised by a command to the process exit code.

    ``validate`` turns ValidationError into FAILED itself; for every other
    command an invalid eval directory aborts the command (exit 2).
    """
    if isinstance(error, EvalError):
        return error.exit_code
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.ERROR
    return ExitCode.ERROR
