"""``--adapter-command``: how a command adapter is started and initialized, once per trial."""

from __future__ import annotations

import asyncio
import os
import shlex
from typing import TextIO

from ..errors import AdapterError
from ._commandstreams import CommandStreamEvaluator
from ._procio import TAG_VARIABLE, new_tag
from ._protocol import MAX_MESSAGE_BYTES
from ._wire import PNG_COMPRESS_LEVEL
from .base import FactoryConfig


class CommandAdapterSpec:
    """``--adapter-command``: a command line started once per trial.

    Args:
        command: the command, split into words like a POSIX shell would (no shell
            features: pipes, redirects and variables are not interpreted).
        grace_s: how long ``close`` waits for a clean exit before terminating.
        terminate_grace_s: how long after SIGTERM before SIGKILL.
        max_message_bytes: protocol message limit in each direction.
        png_compress_level: zlib level of the frames sent.
        stderr: where the adapter's stderr is mirrored (``sys.stderr`` by default).
    """

    def __init__(
        self,
        command: str,
        *,
        grace_s: float = 5.0,
        terminate_grace_s: float = 2.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        png_compress_level: int = PNG_COMPRESS_LEVEL,
        stderr: TextIO | None = None,
    ) -> None:
        try:
            argv = shlex.split(command, posix=True)
        except ValueError as exc:
            raise AdapterError(f"cannot parse --adapter-command {command!r}: {exc}") from None
        if not argv:
            raise AdapterError(
                "--adapter-command is empty; give the command that starts the adapter, "
                'e.g. --adapter-command "node eval/adapter.mjs"'
            )
        self.command = command
        self.argv: tuple[str, ...] = tuple(argv)
        self.grace_s = grace_s
        self.terminate_grace_s = terminate_grace_s
        self.max_message_bytes = max_message_bytes
        self.png_compress_level = png_compress_level
        self.stderr = stderr

    def describe(self) -> str:
        return self.command

    async def create(self, factory_config: FactoryConfig) -> CommandStreamEvaluator:
        """Start the command and initialize it; the process is gone if this raises."""
        label = f"adapter command `{self.command}`"
        tag = new_tag()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                # Inherited by every descendant: found by it even after setsid().
                env={**os.environ, TAG_VARIABLE: tag},
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                # Its own process group, so that everything it starts can be
                # terminated with it, and a terminal's Ctrl-C reaches only us: we
                # decide how the adapter shuts down.
                start_new_session=True,
            )
        except FileNotFoundError:
            raise AdapterError(
                f"cannot start {label}: {self.argv[0]!r} was not found; check the command "
                "and PATH (the command runs without a shell)"
            ) from None
        except PermissionError:
            raise AdapterError(
                f"cannot start {label}: {self.argv[0]!r} is not executable"
            ) from None
        except OSError as exc:
            raise AdapterError(f"cannot start {label}: {exc}") from None
        evaluator = CommandStreamEvaluator(proc, self, label, tag)
        try:
            await evaluator._initialize(factory_config)
        except asyncio.CancelledError:
            evaluator._reaper.kill_now()
            await asyncio.shield(evaluator._stop_tasks())
            raise
        except BaseException as exc:
            try:
                await evaluator._shutdown_after_failed_init()
            finally:
                evaluator._reaper.kill_now()
            if isinstance(exc, AdapterError):
                raise
            raise AdapterError(f"{label} failed to initialize: {exc}") from exc
        return evaluator
