"""Serve a Python evaluator to glasskit_eval as a command adapter (protocol version 1).

Use this when the app lives in another virtualenv or another Python version than
glasskit_eval. The adapter is written exactly like an in-process Python adapter (a
factory taking one config argument, returning an object with ``evaluate(sample,
target)`` and/or ``evaluate_many(samples, target)``, sync or async, and an optional
``close()``; for stream targets ``on_frame(sample, target)`` and the optional
``start_stream(target, stream)`` and ``end_stream(target)``), and served with one command::

    glasskit-eval run --adapter-command \\
        "/path/to/app/.venv/bin/python -m glasskit_eval.protocol_server my_app.eval:create_evaluator"

The target is ``module:callable`` (imported from the current directory) or
``path/to/adapter.py:callable``; the callable may be a nested attribute
(``Adapters.create``), a factory with one argument or none, a class, or a simple
function adapter whose first two parameters are ``image, target_id`` or ``sample,
target``. From a script of your own, call :func:`serve` instead::

    from protocol_server import serve
    raise SystemExit(serve(create_evaluator))

This file is self-contained: it needs only the standard library (Python 3.8 or newer)
and imports nothing else from glasskit_eval, so it can be copied into the app's
repository alone. Pillow is optional: every sample carries the frame as PNG bytes
(``sample.png``) and, when Pillow is importable, ``sample.image`` decodes it on first
use into the same RGB ``PIL.Image`` an in-process adapter receives (closed when the
call returns).

Stdout carries the protocol. While serving, anything else written to stdout (by
``print``, a library, or a child process) is sent to stderr instead, which
glasskit_eval mirrors; and stdin is replaced with an empty input so child processes
cannot swallow requests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

__all__ = ["AdapterConfig", "Frame", "Sample", "Stream", "Target", "load_target", "main", "serve"]

PROTOCOL_VERSION = 1

# Observations nested deeper than this are refused, as glasskit_eval refuses them.
_MAX_DEPTH = 100
_SIMPLE_SIGNATURES = (("image", "target_id"), ("sample", "target"))
_STREAM_METHODS = ("startStream", "frame", "endStream")


class AdapterConfig:
    """What the factory receives, with the fields an in-process factory config has."""

    def __init__(self, eval_dir: Path, config: dict[str, Any], artifacts_dir: Path | None, verbose: bool) -> None:
        self.eval_dir = eval_dir
        self.config = config
        self.artifacts_dir = artifacts_dir
        self.verbose = verbose

    def __repr__(self) -> str:
        return (f"AdapterConfig(eval_dir={self.eval_dir!r}, config={self.config!r}, "
                f"artifacts_dir={self.artifacts_dir!r}, verbose={self.verbose!r})")


class Target:
    """A target: ``id``, ``index``, ``label`` and ``config``, as in-process adapters see it."""

    def __init__(self, id: str, index: int, label: str | None, config: dict[str, Any]) -> None:
        self.id = id
        self.index = index
        self.label = label
        self.config = config

    def __repr__(self) -> str:
        return f"Target(id={self.id!r}, index={self.index!r}, label={self.label!r})"


class Stream:
    """What ``start_stream(target, stream)`` is told: ``case``, ``video``, ``every_s`` (the feed's grid
    spacing, None for every frame), ``pace`` (None in replay) and the stream's wire ``id``."""

    def __init__(self, wire: dict[str, Any]) -> None:
        self.id: str = wire["id"]
        self.case: str = wire["case"]
        self.video: str = wire["video"]
        self.every_s: float | None = wire.get("everyS")
        self.pace: float | None = wire.get("pace")

    def __repr__(self) -> str:
        return f"Stream(case={self.case!r}, video={self.video!r}, every_s={self.every_s!r}, pace={self.pace!r})"


class Frame:
    """One frame of a sample: ``png`` bytes, ``image`` decoded from them on first use, and
    ``timestamp_s`` (the time asked for), ``media_timestamp_s`` (the frame's own time; None
    for a sample without a clip, whose request does not carry it) and ``frame_index``."""

    def __init__(self, image: dict[str, Any], timestamp_s: float, media_timestamp_s: float | None,
                 frame_index: int) -> None:
        self.png: bytes = _b64decode(image["dataBase64"])
        self.mime_type: str = image.get("mimeType", "image/png")
        self.width: int = image["width"]
        self.height: int = image["height"]
        self.timestamp_s = timestamp_s
        self.media_timestamp_s = media_timestamp_s
        self.frame_index = frame_index
        self._image: Any = None

    @property
    def image(self) -> Any:
        """The frame as an RGB ``PIL.Image.Image`` (needs Pillow in this interpreter)."""
        if self._image is None:
            try:
                from PIL import Image
            except ImportError:
                raise RuntimeError(
                    "sample.image needs Pillow installed in the interpreter serving the "
                    "adapter; install pillow there, or use sample.png (the PNG bytes)"
                ) from None
            image: Any = Image.open(io.BytesIO(self.png))
            image.load()
            if image.mode != "RGB":
                image = image.convert("RGB")
            self._image = image
        return self._image

    def _release(self) -> None:
        if self._image is not None:
            self._image.close()

    def __repr__(self) -> str:
        return f"Frame(timestamp_s={self.timestamp_s!r}, frame_index={self.frame_index!r})"


class Sample:
    """One sample: the in-process sample fields, plus the frame as ``png`` bytes.

    ``image`` is decoded lazily with Pillow, so an adapter that only forwards the
    PNG bytes (to a model API, say) never pays for decoding, nor needs Pillow.
    ``frames`` are the sample's frames in time order (:class:`Frame`): a clip sample's
    clip (``is_clip``), else the one frame; ``image`` and ``png`` are the anchor's.
    """

    def __init__(self, wire: dict[str, Any]) -> None:
        self.timestamp_s: float = wire["timestampS"]
        self.frame_index: int = wire["frameIndex"]
        self.sample_index: int = wire["sampleIndex"]
        self.video_path: str = wire["videoPath"]
        self.case_name: str = wire["caseName"]
        clip = wire.get("frames")
        self.is_clip: bool = clip is not None
        self.frames: tuple[Frame, ...] = tuple(
            Frame(f["image"], f["timestampS"], f["mediaTimestampS"], f["frameIndex"]) for f in clip or ()
        )
        anchors = [
            f for f in self.frames if f.timestamp_s == self.timestamp_s and f.frame_index == self.frame_index
        ]
        self._anchor = anchors[0] if anchors else Frame(wire["image"], self.timestamp_s, None, self.frame_index)
        if not self.is_clip:
            self.frames = (self._anchor,)
        self.png: bytes = self._anchor.png
        self.mime_type: str = self._anchor.mime_type
        self.width: int = self._anchor.width
        self.height: int = self._anchor.height
        self.usage: dict[str, float] = {}

    def report_usage(self, **numbers: float | None) -> None:
        """Record tokens, cost and other numbers for this sample; sent beside the result."""
        for key, value in numbers.items():
            if value is not None:
                self.usage[key] = self.usage.get(key, 0) + value

    @property
    def image(self) -> Any:
        """The frame as an RGB ``PIL.Image.Image`` (needs Pillow in this interpreter)."""
        return self._anchor.image

    def _release(self) -> None:
        self._anchor._release()
        for frame in self.frames:
            frame._release()

    def __repr__(self) -> str:
        return (
            f"Sample(case_name={self.case_name!r}, sample_index={self.sample_index!r}, "
            f"timestamp_s={self.timestamp_s!r}, frame_index={self.frame_index!r})"
        )


def _b64decode(text: str) -> bytes:
    import base64

    return base64.b64decode(text, validate=True)


# -- loading ------------------------------------------------------------------


def load_target(target: str) -> Callable[..., Any]:
    """Import ``module:callable`` or ``path/to/file.py:callable`` and return the callable."""
    module_name, sep, attr_path = target.rpartition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(
            f"adapter target {target!r} must look like <module-or-file>:<callable>, "
            "e.g. my_app.eval:create_evaluator or eval/adapter.py:create_evaluator"
        )
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"adapter file not found: {path}")
        # Adapters import their siblings, as a script next to them would.
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        name = f"_glasskit_adapter_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot load adapter file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        obj: Any = module
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        obj = importlib.import_module(module_name)
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{module_name} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise ValueError(f"adapter target {target!r} is not callable")
    factory: Callable[..., Any] = obj
    return factory


def _positional(func: Any) -> tuple[list[str], int | None]:
    """Positional parameter names, and how many are required (None: unknown)."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return [], None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in parameters if p.kind in kinds]
    required = sum(1 for p in parameters if p.kind in kinds and p.default is p.empty)
    return names, required


async def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class _FunctionAdapter:
    """A simple function adapter wearing the evaluator shape."""

    def __init__(self, func: Callable[..., Any], pass_image: bool) -> None:
        self._func = func
        self._pass_image = pass_image

    def evaluate(self, sample: Sample, target: Target) -> Any:
        if self._pass_image:
            if sample.is_clip:
                raise TypeError(
                    "this function adapter takes `image, target_id`, so it would see one frame of "
                    f"a clip sample (target {target.id!r}); take `sample, target` instead and read "
                    "the clip from `sample.frames`"
                )
            return self._func(sample.image, target.id)
        return self._func(sample, target)


async def _construct(factory: Callable[..., Any], config: AdapterConfig) -> Any:
    names, required = _positional(factory)
    if not inspect.isclass(factory) and tuple(names[:2]) in _SIMPLE_SIGNATURES:
        return _FunctionAdapter(factory, pass_image=names[0] == "image")
    if required == 0:
        made = await _resolve(factory())
    elif required is not None and required > 1:
        raise TypeError(
            f"the adapter factory takes {required} required arguments; "
            "a factory takes one config argument or none"
        )
    else:
        made = await _resolve(factory(config))
    # A factory may return a simple function adapter (a closure over its clients).
    if callable(made) and not inspect.isclass(made) and not hasattr(made, "evaluate") \
            and not hasattr(made, "evaluate_many"):
        made_names, _ = _positional(made)
        if tuple(made_names[:2]) in _SIMPLE_SIGNATURES:
            return _FunctionAdapter(made, pass_image=made_names[0] == "image")
    return made


# -- JSON -----------------------------------------------------------------------


def _json_problem(value: Any, where: str = "result", depth: int = 0) -> str | None:
    """Why ``value`` is not JSON-like (None when it is); glasskit_eval's rules."""
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f"{where} is {value!r}, which JSON cannot represent"
        return None
    if depth >= _MAX_DEPTH:
        return f"{where} is nested more than {_MAX_DEPTH} levels deep"
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problem = _json_problem(item, f"{where}[{index}]", depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key {key!r} that is not a string"
            problem = _json_problem(item, f"{where}.{key}", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{where} has type {type(value).__name__}, which is not JSON-like"


def _error_payload(error: BaseException) -> dict[str, Any]:
    text = str(error)
    message = f"{type(error).__name__}: {text}" if text else type(error).__name__
    stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    payload: dict[str, Any] = {"message": message, "stack": stack}
    # Retryable failures (glasskit_eval.TransientError or any `transient = True` exception).
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, (int, float)) and not isinstance(retry_after, bool) and retry_after >= 0:
        payload["retryAfterS"] = retry_after
    if getattr(error, "transient", False) is True:
        payload["transient"] = True
    return payload


# -- serving ---------------------------------------------------------------------


class _Server:
    def __init__(
        self, factory: Callable[..., Any], out: IO[bytes], executor: ThreadPoolExecutor
    ) -> None:
        self._factory = factory
        self._executor = executor
        self._out = out
        self._evaluator: Any = None
        self._evaluate: Any = None
        self._evaluate_many: Any = None
        self._on_frame: Any = None
        self._active: dict[Any, asyncio.Task[None]] = {}
        self._busy_threads = 0
        self._threads_lock = threading.Lock()
        self.exit_code = 0

    @property
    def threads_busy(self) -> bool:
        return self._busy_threads > 0

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")
        self._out.write(data + b"\n")
        self._out.flush()

    def answer(self, request_id: Any, result: Any, usage: Any = None) -> None:
        problem = _json_problem(result)
        if problem is None:
            try:
                message = {"id": request_id, "result": result}
                if usage:
                    message["usage"] = usage
                self.send(message)
                return
            except (TypeError, ValueError, RecursionError) as error:
                problem = str(error)
        self.fail(
            request_id, TypeError(f"the adapter returned a value that is not JSON-like: {problem}")
        )

    def fail(self, request_id: Any, error: BaseException) -> None:
        self.send({"id": request_id, "error": _error_payload(error)})

    async def call(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run a user method: coroutines on the loop, blocking ones on a thread."""
        if inspect.iscoroutinefunction(func):
            return await func(*args)
        loop = asyncio.get_running_loop()

        def tracked() -> Any:
            with self._threads_lock:
                self._busy_threads += 1
            try:
                return func(*args)
            finally:
                with self._threads_lock:
                    self._busy_threads -= 1

        return await _resolve(await loop.run_in_executor(self._executor, tracked))

    async def initialize(self, request_id: Any, params: dict[str, Any]) -> None:
        try:
            version = params.get("protocolVersion")
            if version != PROTOCOL_VERSION:
                raise ValueError(
                    f"unsupported protocol version {version!r}; this server speaks "
                    f"version {PROTOCOL_VERSION}"
                )
            wire = params.get("config") or {}
            artifacts = wire.get("artifactsDir")
            config = AdapterConfig(
                eval_dir=Path(wire.get("evalDir", ".")),
                config=dict(wire.get("config") or {}),
                artifacts_dir=None if artifacts is None else Path(artifacts),
                verbose=bool(wire.get("verbose", False)),
            )
            evaluator = await _construct(self._factory, config)
            evaluate = getattr(evaluator, "evaluate", None)
            evaluate_many = getattr(evaluator, "evaluate_many", None)
            on_frame = getattr(evaluator, "on_frame", None)
            if not callable(evaluate) and not callable(evaluate_many) and not callable(on_frame):
                raise TypeError(
                    f"the adapter factory returned {type(evaluator).__name__}, which has "
                    "neither evaluate(sample, target) nor evaluate_many(samples, target)"
                )
            self._evaluator = evaluator
            self._evaluate = evaluate if callable(evaluate) else None
            self._evaluate_many = evaluate_many if callable(evaluate_many) else None
            self._on_frame = on_frame if callable(on_frame) else None
        except Exception as error:
            self.fail(request_id, error)
            return
        result: dict[str, Any] = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {
                "evaluate": self._evaluate is not None,
                "evaluateMany": self._evaluate_many is not None,
            },
        }
        if self._on_frame is not None:
            # Only then: a sample adapter's answer stays what protocol version 1 has always sent.
            result["capabilities"]["frame"] = True
        # A declared version lets the runner's observation cache (run --cache) trust answers.
        declared = getattr(self._evaluator, "adapter_version", None)
        if isinstance(declared, str) and declared:
            result["adapterVersion"] = declared
        self.send({"id": request_id, "result": result})

    def start(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._evaluation(request_id, method, params))
        self._active[request_id] = task

        def finished(task: asyncio.Future[None]) -> None:
            self._active.pop(request_id, None)
            # Also covers a task cancelled before it ever ran, whose own code never
            # got the chance to answer.
            if task.cancelled():
                self.fail(request_id, RuntimeError("cancelled by glasskit_eval"))

        task.add_done_callback(finished)

    async def _evaluation(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        samples: list[Sample] = []
        try:
            if self._evaluator is None:
                raise RuntimeError("the adapter is not initialized")
            target_wire = params["target"]
            target = Target(
                target_wire["id"],
                target_wire["index"],
                target_wire.get("label"),
                dict(target_wire.get("config") or {}),
            )
            if method == "evaluate":
                if self._evaluate is None:
                    raise TypeError("the adapter does not implement evaluate")
                samples = [Sample(params["sample"])]
                result = await self.call(self._evaluate, samples[0], target)
            elif method in _STREAM_METHODS:
                samples = [Sample(params["sample"])] if method == "frame" else []
                result = await self._stream_call(method, params, target, samples)
            else:
                if self._evaluate_many is None:
                    raise TypeError("the adapter does not implement evaluate_many")
                samples = [Sample(item) for item in params["samples"]]
                result = await self.call(self._evaluate_many, samples, target)
                if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
                    raise TypeError(
                        "evaluate_many must return a list with one observation per sample, "
                        f"got {type(result).__name__}"
                    )
                result = list(result)
        except asyncio.CancelledError:
            # A thread may still be using the images, so they are left to the GC.
            raise
        except Exception as error:
            self._release(samples)
            self.fail(request_id, error)
            return
        self._release(samples)
        usage: Any = None
        if any(sample.usage for sample in samples):
            usage = samples[0].usage if method != "evaluateMany" else [s.usage or None for s in samples]
        self.answer(request_id, result, usage)

    async def _stream_call(self, method: str, params: dict[str, Any], target: Target, samples: list[Sample]) -> Any:
        """A stream request: the frame's (or the end's) emissions, None after startStream."""
        if self._on_frame is None:
            raise TypeError("the adapter does not implement on_frame")
        if method == "frame":
            return await self.call(self._on_frame, samples[0], target)
        name = "start_stream" if method == "startStream" else "end_stream"
        hook = getattr(self._evaluator, name, None)
        if not callable(hook):
            return None
        if method == "startStream":
            await self.call(hook, target, Stream(params["stream"]))
            return None
        return await self.call(hook, target)

    @staticmethod
    def _release(samples: list[Sample]) -> None:
        for sample in samples:
            sample._release()

    def cancel(self, params: Any) -> None:
        task = self._active.get(params.get("id")) if isinstance(params, dict) else None
        if task is not None:
            task.cancel()

    async def settle(self, cancel: bool) -> None:
        tasks = list(self._active.values())
        if cancel:
            for task in tasks:
                task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close_evaluator(self) -> None:
        evaluator, self._evaluator = self._evaluator, None
        close = getattr(evaluator, "close", None)
        if callable(close):
            await self.call(close)


async def _serve(
    factory: Callable[..., Any], inp: IO[bytes], out: IO[bytes], executor: ThreadPoolExecutor
) -> _Server:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()

    def read_lines() -> None:
        # A plain blocking thread works for pipes, files and terminals alike.
        try:
            for line in inp:
                loop.call_soon_threadsafe(lines.put_nowait, line)
        except (OSError, ValueError):
            pass
        finally:
            # The loop may already be gone when input ends after close.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read_lines, name="glasskit-protocol-reader", daemon=True).start()
    server = _Server(factory, out, executor)
    closed = False
    while True:
        line = await lines.get()
        if line is None:
            break
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request must be a JSON object")
        except ValueError as error:
            print(f"glasskit_eval protocol_server: invalid request: {error}", file=sys.stderr)
            server.exit_code = 1
            break
        method = request.get("method")
        request_id = request.get("id")
        params = request.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "cancel":
            server.cancel(params)
        elif method == "initialize":
            # Sequential, as evaluations only start once the evaluator exists.
            await server.initialize(request_id, params)
        elif method in ("evaluate", "evaluateMany", *_STREAM_METHODS):
            server.start(request_id, method, params)
        elif method == "close":
            closed = True
            await server.settle(cancel=False)
            try:
                await server.close_evaluator()
            except Exception as error:
                server.fail(request_id, error)
            else:
                server.send({"id": request_id, "result": None})
            break
        else:
            server.fail(request_id, ValueError(f"unknown method: {method!r}"))
    if not closed:
        # Input ended without close: glasskit_eval went away, so stop and clean up.
        await server.settle(cancel=True)
        try:
            await server.close_evaluator()
        except Exception as error:
            print(f"glasskit_eval protocol_server: close() failed: {error}", file=sys.stderr)
    return server


def _claim_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """Keep fds 0/1 for the protocol; point everyone else's stdin/stdout elsewhere."""
    sys.stdout.flush()
    protocol_in = os.fdopen(os.dup(0), "rb")
    protocol_out = os.fdopen(os.dup(1), "wb")
    # Dup at the descriptor level, so C extensions and child processes are covered,
    # not only print().
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return protocol_in, protocol_out


def serve(
    factory: Callable[..., Any],
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
) -> int:
    """Serve ``factory`` over the protocol until glasskit_eval closes it; return the exit code.

    With the default streams this takes over the process's stdin and stdout (see the
    module docstring). Pass binary ``stdin``/``stdout`` to serve other streams.
    """
    if stdin is None and stdout is None:
        stdin, stdout = _claim_stdio()
    elif stdin is None or stdout is None:
        raise ValueError("pass both stdin and stdout, or neither")
    # Our own pool rather than the loop's default one, which asyncio.run() would wait
    # for on the way out, however long a cancelled blocking call still runs.
    executor = ThreadPoolExecutor(thread_name_prefix="glasskit-adapter")
    try:
        server = asyncio.run(_serve(factory, stdin, stdout, executor))
    finally:
        executor.shutdown(wait=False)
    if server.threads_busy:
        # A blocking call that was cancelled is still running on a worker thread and
        # would hold up interpreter exit; glasskit_eval expects a prompt exit.
        sys.stderr.flush()
        os._exit(server.exit_code)
    return server.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m glasskit_eval.protocol_server",
        description="Serve a Python evaluator to glasskit_eval over the command adapter protocol.",
    )
    parser.add_argument(
        "target",
        help="module:callable or path/to/adapter.py:callable naming the evaluator factory",
    )
    args = parser.parse_args(argv)
    try:
        factory = load_target(args.target)
    except Exception as error:
        print(
            f"glasskit_eval protocol_server: cannot load {args.target!r}: "
            f"{type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return 2
    return serve(factory)


if __name__ == "__main__":
    raise SystemExit(main())
