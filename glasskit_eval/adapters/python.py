"""In-process Python adapters: every loading form of the adapter reference.

``module-or-file:callable`` names a factory (sync or async, taking the factory
config or nothing), a class, or a simple function adapter whose first two
positional parameters are ``image, target_id`` or ``sample, target``.
Synchronous adapter methods run on the thread pool so a blocking call never
stalls the event loop (and with it decoding and other calls).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import AdapterError
from .base import Evaluator, FactoryConfig, Sample, Target

_SIMPLE_SIGNATURES = (("image", "target_id"), ("sample", "target"))


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
            sys.modules.pop(name, None)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
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
    except Exception as exc:
        raise AdapterError(f"importing adapter module {module!r} failed: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class PythonEvaluator:
    """Wraps a user evaluator object (or simple function) as an :class:`Evaluator`."""

    def __init__(self, obj: Any, *, simple: tuple[str, str] | None = None) -> None:
        self._obj = obj
        self._simple = simple
        self._evaluate = None if simple else getattr(obj, "evaluate", None)
        self._evaluate_many = None if simple else getattr(obj, "evaluate_many", None)
        self._close = None if simple else getattr(obj, "close", None)
        if simple is None and not callable(self._evaluate) and not callable(self._evaluate_many):
            raise AdapterError(f"the adapter factory returned {type(obj).__name__!s}, which has neither "
                               "evaluate(sample, target) nor evaluate_many(samples, target)")

    @property
    def batch(self) -> bool:
        return callable(self._evaluate_many)

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
            return await func(*args)
        result = await asyncio.to_thread(func, *args)
        return await _maybe_await(result)

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        if self._simple == ("image", "target_id"):
            return await self._call(self._obj, sample.image, target.id)
        if self._simple is not None:
            return await self._call(self._obj, sample, target)
        assert self._evaluate is not None
        return await self._call(self._evaluate, sample, target)

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        assert self._evaluate_many is not None
        result = await self._call(self._evaluate_many, list(samples), target)
        if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
            raise AdapterError(f"evaluate_many must return a list with one observation per sample, "
                               f"got {type(result).__name__}")
        return list(result)

    async def cancel_pending(self) -> None:
        # In-process calls are cancelled through their asyncio tasks by the runner.
        return None

    async def close(self) -> None:
        if callable(self._close):
            try:
                await self._call(self._close)
            except Exception as exc:
                raise AdapterError(f"adapter close() failed: {_describe(exc)}") from exc


class PythonAdapterSpec:
    """A ``module-or-file:callable`` target, loaded once and constructed per trial."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._callable: Any = None

    def describe(self) -> str:
        return self.target

    def load(self) -> Any:
        if self._callable is None:
            self._callable = resolve_callable(self.target)
        return self._callable

    async def create(self, factory_config: FactoryConfig) -> Evaluator:
        func = self.load()
        names = _positional_names(func)
        if not inspect.isclass(func) and tuple(names[:2]) in _SIMPLE_SIGNATURES:
            return PythonEvaluator(func, simple=(names[0], names[1]))
        required = _required_count(func)
        try:
            if required == 0:
                obj = await _maybe_await(func())
            elif required == 1 or required is None:
                obj = await _maybe_await(func(factory_config))
            else:
                raise AdapterError(f"adapter factory {self.target!r} takes {required} required arguments; "
                                   "a factory takes one config argument or none")
        except AdapterError:
            raise
        except Exception as exc:
            raise AdapterError(f"adapter factory {self.target!r} failed: {_describe(exc)}") from exc
        return _evaluator_for(obj, self.target)


def _evaluator_for(obj: Any, target: str) -> PythonEvaluator:
    """What a factory returned: an evaluator object, or a simple function adapter."""
    if callable(obj) and not inspect.isclass(obj) and not hasattr(obj, "evaluate") \
            and not hasattr(obj, "evaluate_many"):
        # A factory may build a closure over its clients and return it, as a simple function.
        names = _positional_names(obj)
        if tuple(names[:2]) in _SIMPLE_SIGNATURES:
            return PythonEvaluator(obj, simple=(names[0], names[1]))
        shown = getattr(obj, "__name__", type(obj).__name__)
        raise AdapterError(f"the adapter factory {target!r} returned the function {shown}({', '.join(names)}); "
                           "a function adapter's first two parameters must be named `image, target_id` or "
                           "`sample, target`, or return an object with evaluate(sample, target) or "
                           "evaluate_many(samples, target)")
    return PythonEvaluator(obj)
