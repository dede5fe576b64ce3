"""Errors and exit codes: every error a user can see, in one tree.

The tree::

    EvalError                   anything we report to the user without a traceback (exit 2)
    ├── UsageError              bad option combinations or values
    │   ├── CaseEditError       an edit names a target, block or key the case file lacks
    │   ├── DotenvError         an --env-file line cannot be read (names file and line, never a value)
    │   └── ReportReadError     a file given as a report is not one of our JSON reports
    ├── ValidationError         the eval directory or a case file is invalid; carries Problems
    ├── VideoError              a video is missing, unreadable or too short
    │   └── StoreError          a video store's config, credentials, transfer or verification
    │       └── PreconditionFailed  an upload found an object already at its key
    ├── AdapterError            loading, constructing, calling or closing the adapter failed
    │   ├── ProtocolError       a command adapter broke the NDJSON protocol
    │   │   └── ProtocolBroken  ... and is therefore gone (also an AdapterGone)
    │   ├── AdapterGone         a command adapter's process ended: no call can succeed any more
    │   ├── CallTimeout         an adapter call ran past --timeout and was cancelled
    │   ├── HttpStatusError     an HTTP adapter's endpoint answered with an error status
    │   └── SampleFailure       a fail-fast adapter error, naming its sample
    ├── OutputError             a report, frame, artifact or case file could not be written
    │   └── CaseConflictError   a case file changed on disk since it was read
    ├── CheckpointError         a checkpoint cannot be read, resumed or written
    ├── Interrupted             SIGINT or SIGTERM asked a command to stop (exit 130)
    └── CommandStopped          a long command stopped after reporting what it kept

``cli.main`` is the one place that turns them into exit codes (``exit_code_for``). Every
message says what went wrong and, where we can tell, what to do next; none contains a secret.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    #: The command succeeded; for ``run``, every configured gate passed.
    OK = 0
    #: Validation failed, or ``run`` completed but a gate failed.
    FAILED = 1
    #: Usage, setup, config, video or adapter error aborted the command.
    ERROR = 2
    #: SIGINT (Ctrl+C) or SIGTERM stopped the command: 128 + SIGINT, as shells and upstream report it.
    INTERRUPTED = 130


class Problem:
    """One validation finding, located as precisely as the input allows.

    Immutable and compared by value. A plain class, not a dataclass, because the CLI
    imports this module on every start and ``dataclasses`` costs more than ``--help``.
    """

    __slots__ = ("file", "line", "message", "path")

    file: str | None
    path: str
    message: str
    line: int | None

    def __init__(self, file: str | None, path: str, message: str, line: int | None = None) -> None:
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "line", line)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Problem is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Problem is immutable; cannot delete {name!r}")

    def _key(self) -> tuple[str | None, str, str, int | None]:
        return (self.file, self.path, self.message, self.line)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, Problem) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[type[Problem], tuple[str | None, str, str, int | None]]:
        return (Problem, self._key())

    def __repr__(self) -> str:
        return (f"Problem(file={self.file!r}, path={self.path!r}, message={self.message!r}, "
                f"line={self.line!r})")

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

    #: A failure worth retrying (``--retries``): a command adapter's ``"transient": true``,
    #: an HTTP 429/5xx. ``retry_after`` is the wait in seconds the adapter asked for.
    transient: bool = False
    retry_after: float | None = None
    #: The request left and may have been acted on though it failed (an HTTP 500, a dropped
    #: connection): a stream adapter's call is then not retried, lest it get a frame twice.
    maybe_processed: bool = False

    def __init__(self, message: str = "", *, stack: str | None = None) -> None:
        super().__init__(message)
        #: The adapter's own stack trace, when its error answer carried one (command adapters).
        self.stack = stack


class ProtocolError(AdapterError):
    """A command adapter sent something protocol version 1 does not allow."""


class AdapterGone(AdapterError):
    """A command adapter's process exited or stopped talking: no further call can succeed.

    Not "an individual call failure": even with ``--keep-going`` it stops the run (exit 2,
    checkpoint kept), instead of recording every remaining sample with the same error.
    """


class ProtocolBroken(ProtocolError, AdapterGone):
    """A command adapter broke the protocol; it is stopped and takes no more calls."""


class SampleFailure(AdapterError):
    """A fail-fast adapter error, naming the sample it happened on."""

    def __init__(self, message: str, completed: int, *, traceback: str | None = None,
                 keep_going_helps: bool = True) -> None:
        super().__init__(message)
        #: Samples of the case judged before the failure.
        self.completed = completed
        #: The adapter code's traceback (or a command adapter's stack), printed with --verbose.
        self.traceback = traceback
        #: Whether --keep-going would have recorded the error and gone on (not when the adapter is gone).
        self.keep_going_helps = keep_going_helps


class CallTimeout(AdapterError):
    """An adapter call ran past ``--timeout`` and was cancelled (retried like a transient error)."""

    transient = True
    retry_after: float | None = None


class HttpStatusError(AdapterError):
    """An HTTP adapter's endpoint answered with an error status; 429 and 5xx are transient."""

    def __init__(self, message: str, status: int, *, transient: bool, retry_after: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.retry_after = retry_after if transient else None


class DotenvError(UsageError):
    """A dotenv file that cannot be read; the message names the file and line, never a value."""


class ReportReadError(UsageError):
    """A file given as a report (``report``, ``compare``, ``--baseline``) is not one of our JSON reports."""


class StoreError(VideoError):
    """A video store operation failed: config, credentials, transfer or verification.

    Messages name the store and key and say what to do next; they never contain
    credential values.
    """


class PreconditionFailed(StoreError):
    """``If-None-Match: *`` found an object already at the key."""


class OutputError(EvalError):
    """A report, exported frame, artifact or case file could not be written."""


class CaseEditError(UsageError):
    """An edit names a target, block or key that the case file does not have."""


class CaseConflictError(OutputError):
    """The file changed on disk since it was read; nothing was written."""

    def __init__(self, path: object, expected: str, actual: str | None, detail: str | None = None) -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        state = "was deleted" if actual is None else "changed on disk"
        super().__init__(detail or f"{path} {state} since it was read; nothing was written. "
                         "Reload it and apply the edit again.")


class CheckpointError(EvalError):
    """A checkpoint that cannot be read, resumed or written."""


class Interrupted(EvalError):
    """The user (or a supervisor) asked the command to stop."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.signal_name = signal_name


class CommandStopped(EvalError):
    """A checkpointed command stopped early and has already said why and how to resume.

    ``lines`` are printed as they are (no ``error:`` label); the exit code is the cause's.
    """

    def __init__(self, lines: list[str], cause: EvalError) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.cause = cause
        self.exit_code = cause.exit_code


def exit_code_for(error: BaseException) -> ExitCode:
    """Map an exception raised by a command to the process exit code.

    ``validate`` turns ValidationError into FAILED itself; for every other
    command an invalid eval directory aborts the command (exit 2).
    """
    if isinstance(error, EvalError):
        return error.exit_code
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.ERROR
