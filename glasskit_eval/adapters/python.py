"""In-process Python adapters: every loading form of the adapter reference.

``module-or-file:callable`` names a factory (sync or async, taking the factory
config or nothing), a class, or a simple function adapter whose first two
positional parameters are ``image, target_id`` or ``sample, target``.
Synchronous adapter code (the import, the factory, every method) runs on worker
threads, so a blocking call never stalls the event loop (and with it decoding, other
calls and Ctrl+C). Whatever the adapter raises, ``SystemExit`` and other
``BaseException`` subclasses included, becomes an :class:`AdapterError`: an adapter
cannot end the run by raising. ``close`` is bounded (:data:`CLOSE_TIMEOUT_S`), and waits
up to :data:`CALLS_GRACE_S` for calls still running on threads before it runs.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import itertools
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from ..errors import AdapterError
from ..support.threads import to_daemon_thread
from .base import Evaluator, FactoryConfig, Sample, StreamInfo, Target

_SIMPLE_SIGNATURES = (("image", "target_id"), ("sample", "target"))

#: How long ``close()`` may take, as for command adapters; after it the call is abandoned.
CLOSE_TIMEOUT_S: Final = 5.0
#: How long closing waits for synchronous calls still running (after an interrupt or a
#: fail-fast error cancelled them) before abandoning them: close() must not race them.
CALLS_GRACE_S: Final = 5.0


def default_target(eval_dir: Path) -> str:
    return f"{eval_dir / 'adapter.py'}:create_evaluator"


def _split_target(target: str) -> tuple[str, str]:
    module, sep, attr = target.rpartition(":")
    if not sep or not module or not attr:
        raise AdapterError(f"adapter target {target!r} must look like <module-or-file>:<callable>, "
                           "e.g. eval/adapter.py:create_evaluator or my_app.eval:create_evaluator")
    return module, attr


def _looks_like_file(module: str) -> bool:
    return module.endswith(".py") or "/" in module or "\\" in module


def _load_module(module: str) -> Any:
    if _looks_like_file(module):
        path = Path(module).expanduser().resolve()
        if not path.is_file():
            raise AdapterError(f"adapter file not found: {path}; create it or pass --adapter "
                               "<module-or-file>:<callable>")
        # Adapters import their siblings (helpers next to adapter.py), as a script would.
        parent = str(path.parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        name = f"_glasskit_adapter_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise AdapterError(f"cannot load adapter file {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException as exc:
            # Imports run on a worker thread, so even KeyboardInterrupt here is the module's own.
            sys.modules.pop(name, None)
            raise AdapterError(f"importing adapter file {path} failed: {_describe(exc)}") from exc
        return mod
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise AdapterError(f"adapter module {module!r} not found; check the name, the current "
                               "directory, or pass a file path such as eval/adapter.py") from exc
        raise AdapterError(f"importing adapter module {module!r} failed: {_describe(exc)}") from exc
    except BaseException as exc:
        raise AdapterError(f"importing adapter module {module!r} failed: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AdapterError):
        return str(exc)  # already says what happened
    try:
        text = str(exc)
    except Exception as inner:  # an adapter's exception class can be broken too
        text = f"<its message could not be read: {type(inner).__name__}>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _contained(exc: BaseException) -> AdapterError:
    """A ``BaseException`` the adapter raised (``sys.exit(7)``) as the adapter's error."""
    return AdapterError(_describe(exc))


def _guarded(func: Callable[..., Any], *args: Any) -> Any:
    """Call adapter code on a worker thread; only ordinary exceptions leave it."""
    try:
        return func(*args)
    except Exception:
        raise
    except BaseException as exc:
        raise _contained(exc) from exc


async def _guarded_await(awaitable: Any) -> Any:
    try:
        return await awaitable
    except (Exception, asyncio.CancelledError):
        raise
    except BaseException as exc:  # SystemExit in a coroutine would otherwise stop the event loop
        raise _contained(exc) from exc


def _materialize(result: Any, count: int) -> list[Any]:
    """At most ``count + 1`` items of what evaluate_many returned: an endless iterator is an error."""
    if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
        raise AdapterError(f"evaluate_many must return a list with one observation per sample, "
                           f"got {type(result).__name__}")
    items = list(itertools.islice(result, count + 1))
    if len(items) > count:
        raise AdapterError(f"evaluate_many returned more than {count} observations for {count} samples; "
                           "return exactly one per sample, in order")
    return items


def resolve_callable(target: str) -> Any:
    module_name, attr_path = _split_target(target)
    obj = _load_module(module_name)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AdapterError(f"adapter {target!r}: {module_name} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise AdapterError(f"adapter {target!r} is not callable")
    return obj


def _positional_names(func: Callable[..., Any]) -> list[str]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _required_count(func: Callable[..., Any]) -> int | None:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    return sum(1 for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


class PythonEvaluator:
    """Wraps a user evaluator object (or simple function) as an :class:`Evaluator`."""

    def __init__(self, obj: Any, *, simple: tuple[str, str] | None = None, name: str = "the adapter",
                 stderr: TextIO | None = None) -> None:
        self._obj = obj
        self._simple = simple
        self._name = name
        self._stderr = stderr
        self._closed = False
        #: Synchronous calls whose thread has not finished, cancelled or not.
        self._running: set[threading.Event] = set()
        self._evaluate = None if simple else getattr(obj, "evaluate", None)
        self._evaluate_many = None if simple else getattr(obj, "evaluate_many", None)
        self._close = None if simple else getattr(obj, "close", None)
        self._on_frame = None if simple else getattr(obj, "on_frame", None)
        self._start_stream = None if simple else getattr(obj, "start_stream", None)
        self._end_stream = None if simple else getattr(obj, "end_stream", None)
        if simple is None and not callable(self._evaluate) and not callable(self._evaluate_many) \
                and not callable(self._on_frame):
            raise AdapterError(f"the adapter factory returned {type(obj).__name__!s}, which has neither "
                               "evaluate(sample, target) nor evaluate_many(samples, target)")

    @property
    def batch(self) -> bool:
        return callable(self._evaluate_many)

    @property
    def takes_image_only(self) -> bool:
        """A function adapter declared ``(image, target_id)``: it gets the anchor frame alone."""
        return self._simple == ("image", "target_id")

    @property
    def declared_version(self) -> str | None:
        """The evaluator's ``adapter_version`` (or ``version``) string, if it declares one."""
        for name in ("adapter_version", "version"):
            value = getattr(self._obj, name, None)
            if isinstance(value, str) and value:
                return value
        return None

    async def _call(self, func: Callable[..., Any], *args: Any) -> Any:
        if inspect.iscoroutinefunction(func):
            return await _guarded_await(func(*args))
        result = await self._in_thread(func, *args)
        if inspect.isawaitable(result):
            return await _guarded_await(result)
        return result

    async def _in_thread(self, func: Callable[..., Any], *args: Any) -> Any:
        finished = threading.Event()

        def work() -> Any:
            try:
                return _guarded(func, *args)
            finally:
                finished.set()

        self._running.add(finished)
        try:
            return await to_daemon_thread(work)
        finally:
            # A cancelled call's thread may still run: close() waits for it.
            if finished.is_set():
                self._running.discard(finished)

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        if self._simple == ("image", "target_id"):
            return await self._call(self._obj, sample.image, target.id)
        if self._simple is not None:
            return await self._call(self._obj, sample, target)
        if self._evaluate is None:
            # A stream-only adapter (on_frame) asked for a sample target.
            raise AdapterError(f"adapter {self._name} has no evaluate(sample, target) for target {target.id!r}, "
                               "a sample target; add evaluate or give the target `events`")
        return await self._call(self._evaluate, sample, target)

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        assert self._evaluate_many is not None
        result = await self._call(self._evaluate_many, list(samples), target)
        if type(result) in (list, tuple):
            return list(result)
        # A generator may be endless or block: read it on a thread, and never past one too many.
        items: list[Any] = await self._in_thread(_materialize, result, len(samples))
        return items

    @property
    def streams(self) -> bool:
        return callable(self._on_frame)

    async def start_stream(self, target: Target, stream: StreamInfo) -> None:
        if callable(self._start_stream):
            await self._call(self._start_stream, target, stream)

    async def on_frame(self, sample: Sample, target: Target) -> Any:
        assert self._on_frame is not None
        return await self._call(self._on_frame, sample, target)

    async def end_stream(self, target: Target) -> Any:
        return await self._call(self._end_stream, target) if callable(self._end_stream) else None

    async def cancel_pending(self) -> None:
        # In-process calls are cancelled through their asyncio tasks by the runner.
        return None

    async def close(self) -> None:
        """Close once: after the calls still running finish (or are abandoned), within a bound."""
        if self._closed:
            return
        self._closed = True
        await self._wait_for_running_calls()
        if not callable(self._close):
            return
        try:
            await asyncio.wait_for(self._call(self._close), CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise AdapterError(f"adapter {self._name}: close() did not return within {CLOSE_TIMEOUT_S:g}s; "
                               "it was abandoned (make close() return promptly)") from None
        except Exception as exc:
            raise AdapterError(f"adapter {self._name}: close() failed: {_describe(exc)}") from exc

    async def _wait_for_running_calls(self) -> None:
        running = [event for event in self._running if not event.is_set()]
        if not running:
            return

        def wait_all() -> int:
            deadline = time.monotonic() + CALLS_GRACE_S
            for event in running:
                event.wait(max(0.0, deadline - time.monotonic()))
            return sum(1 for event in running if not event.is_set())

        left = await to_daemon_thread(wait_all)
        if left:
            sink = self._stderr if self._stderr is not None else sys.stderr
            calls = f"{left} call{'s' if left != 1 else ''}"
            print(f"adapter {self._name}: {calls} still running {CALLS_GRACE_S:g}s after the run stopped "
                  "calling it; abandoned (their threads end with the process), closing the adapter now",
                  file=sink, flush=True)


class PythonAdapterSpec:
    """A ``module-or-file:callable`` target, loaded once and constructed per trial."""

    def __init__(self, target: str, *, stderr: TextIO | None = None) -> None:
        self.target = target
        self.stderr = stderr
        self._callable: Any = None

    def describe(self) -> str:
        return self.target

    def load(self) -> Any:
        if self._callable is None:
            self._callable = resolve_callable(self.target)
        return self._callable

    async def create(self, factory_config: FactoryConfig) -> Evaluator:
        # The import and a synchronous factory run on a worker thread: a slow one must not
        # keep the event loop (and so Ctrl+C) waiting.
        func = self._callable if self._callable is not None else await to_daemon_thread(self.load)
        names = _positional_names(func)
        if not inspect.isclass(func) and tuple(names[:2]) in _SIMPLE_SIGNATURES:
            return PythonEvaluator(func, simple=(names[0], names[1]), name=self.target, stderr=self.stderr)
        required = _required_count(func)
        if required is not None and required > 1:
            raise AdapterError(f"adapter factory {self.target!r} takes {required} required arguments; "
                               "a factory takes one config argument or none")
        args = () if required == 0 else (factory_config,)
        try:
            if inspect.iscoroutinefunction(func):
                obj = await _guarded_await(func(*args))
            else:
                obj = await to_daemon_thread(_guarded, func, *args)
                if inspect.isawaitable(obj):
                    obj = await _guarded_await(obj)
        except Exception as exc:
            raise AdapterError(f"adapter factory {self.target!r} failed: {_describe(exc)}") from exc
        return _evaluator_for(obj, self.target, self.stderr)


def _evaluator_for(obj: Any, target: str, stderr: TextIO | None) -> PythonEvaluator:
    """What a factory returned: an evaluator object, or a simple function adapter."""
    if callable(obj) and not inspect.isclass(obj) and not hasattr(obj, "evaluate") \
            and not hasattr(obj, "evaluate_many"):
        # A factory may build a closure over its clients and return it, as a simple function.
        names = _positional_names(obj)
        if tuple(names[:2]) in _SIMPLE_SIGNATURES:
            return PythonEvaluator(obj, simple=(names[0], names[1]), name=target, stderr=stderr)
        shown = getattr(obj, "__name__", type(obj).__name__)
        raise AdapterError(f"the adapter factory {target!r} returned the function {shown}({', '.join(names)}); "
                           "a function adapter's first two parameters must be named `image, target_id` or "
                           "`sample, target`, or return an object with evaluate(sample, target) or "
                           "evaluate_many(samples, target)")
    return PythonEvaluator(obj, name=target, stderr=stderr)
