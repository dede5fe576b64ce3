"""Each checkpointed command's invocation as frozen data, and every check of a recorded one.

A request is what the command line asked for, independent of argparse; ``run`` and ``seed``
store theirs in the checkpoint manifest, and a resume restores it field by field through
:func:`restore_fields`, so a hand-edited manifest (``concurrency: 0``, ``repeat: -3``) is a
:class:`~glasskit_eval.errors.CheckpointError`, never a hang or a false success. The engine
never sees a request: ``run`` turns one into :class:`~glasskit_eval.evaluation.options.TrialOptions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..adapters.resilient import CallPolicy
from ..cases.model import StreamGates
from ..errors import CheckpointError, UsageError
from ..evaluation.earlystop import EarlyStopOptions
from ..evaluation.gates import GateOptions
from ..evaluation.options import TrialOptions
from ..plan.blocks import DEFAULT_BLOCK_S
from ..plan.schedule import Filters
from ..plan.shard import parse_shard
from ..support.timevalues import MAX_PACE, MIN_PACE, parse_cli_time

#: The checkpoint kinds (``runs/checkpoints/<kind>-...``).
RUN_KIND = "run"
SEED_KIND = "seed"

ANNOTATION_MODES = ("auto", "github", "none")
CACHE_MODES = ("read", "write", "readwrite")
ORDERS = ("declaration", "time")
REGRESSION_MODES = ("any", "significant")

Check = Callable[[Any], bool]


@dataclass(frozen=True)
class Comparison:
    """How a run is judged against a baseline report (``run``, ``merge-reports``, ``compare``)."""

    #: ``any``, ``significant`` or None (``--fail-on-regression``).
    fail_on_regression: str | None = None
    #: ``--fail-on-latency-regression``: seconds the median latency may surely grow by.
    fail_on_latency_regression_s: float | None = None
    #: ``--confidence`` of every interval and ``--alpha`` of every test.
    confidence: float = 0.95
    alpha: float = 0.05


@dataclass(frozen=True)
class AdapterRequest:
    """What every checkpointed adapter command records (``RunRequest``, ``SeedRequest`` add theirs)."""

    eval_dir: str
    adapter: str | None = None
    adapter_command: str | None = None
    case: str | None = None
    targets: tuple[str, ...] = ()
    concurrency: int = 1
    keep_going: bool = False
    verbose: bool = False
    #: Where the checkpoint goes when the eval directory cannot be written (absolute once stored).
    checkpoint_dir: str | None = None

    def checkpoint_root(self) -> Path | None:
        return Path(self.checkpoint_dir) if self.checkpoint_dir else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        return data


@dataclass(frozen=True)
class RunRequest(AdapterRequest):
    """Everything needed to repeat a run exactly (a resume restores it from the manifest)."""

    adapter_config_path: str | None = None
    #: The adapter config contents; recorded once loaded so a resume restores them exactly.
    adapter_config: dict[str, Any] | None = None
    #: Times as exact fractions in text (``"3/2"``), so a resume selects the same samples.
    at: tuple[str, ...] = ()
    from_s: str | None = None
    until_s: str | None = None
    repeat: int = 1
    min_pass_rate: float | None = None
    min_target_pass_rate: float | None = None
    max_failures: int | None = None
    max_flaky_samples: int | None = None
    output_json: str | None = None
    artifacts_dir: str | None = None
    save_failures: bool = False
    allow_empty: bool = False
    #: ``--html``: the self-contained HTML report to write, with thumbnails of failed frames.
    html: str | None = None
    #: ``--html-budget-mb``: embedded thumbnails' size budget; beyond it they link to artifacts.
    html_budget_mb: int = 25
    #: CI outputs: JUnit XML path, annotation mode, baseline report, shard ``I/N``.
    junit_xml: str | None = None
    annotations: str = "auto"
    baseline: str | None = None
    #: ``any``, ``significant`` or None (``--fail-on-regression``).
    fail_on_regression: str | None = None
    #: ``--fail-on-latency-regression``: seconds the median latency may surely grow by.
    fail_on_latency_regression_s: float | None = None
    #: ``--confidence`` of every interval and ``--alpha`` of every test.
    confidence: float = 0.95
    alpha: float = 0.05
    #: Resolved when the run starts (``--shard auto`` reads the CI's variables then), so a
    #: resume runs the same part.
    shard: str | None = None
    #: Completed run checkpoints kept when the run ends; 0 keeps all.
    keep_checkpoints: int = 10
    #: Observation cache directory (``--cache``); None: off.
    cache_dir: str | None = None
    cache_mode: str = "readwrite"
    cache_max_mb: int = 512
    #: Frame-lock mismatches are validation errors, not warnings.
    strict_pins: bool = False
    #: Per-call timeout in seconds (``--timeout`` or config.yaml ``run: timeout_s``).
    timeout_s: float | None = None
    retries: int = 0
    retry_backoff_s: float = 1.0
    max_calls_per_second: float | None = None
    adapter_http: str | None = None
    adapter_exec: str | None = None
    max_p95_latency_s: float | None = None
    max_cost: float | None = None
    #: ``declaration`` (target by target, as the adapter reference says) or ``time``.
    order: str = "declaration"
    #: ``--arm`` (``NAME`` or ``NAME=PATH``, the path absolute) and ``--perturb`` specs, as given.
    arms: tuple[str, ...] = ()
    perturb: tuple[str, ...] = ()
    #: ``--control``: the arm the others are compared with (default: the plain adapter).
    control: str | None = None
    #: ``--seed``: seeds every perturbation's random choices.
    seed: int = 0
    #: ``--gate-arm``: only this arm's gates decide the run.
    gate_arm: str | None = None
    #: ``--max-robustness-drop``: how far a perturbation arm's pass rate may significantly fall.
    max_robustness_drop: float | None = None
    #: ``--max-blind-pass-rate``: the most of the control's passes a blind arm may still pass.
    max_blind_pass_rate: float | None = None
    #: ``--jitter-frames``: the control arm also judged on this many frames either side (0: off).
    jitter_frames: int = 0

    @property
    def with_arms(self) -> bool:
        return bool(self.arms or self.perturb)
    #: Stream gates applied to every stream target, and the paced clock (None: replay).
    min_recall: float | None = None
    max_false_alarms_per_min: float | None = None
    max_detection_latency_p95_s: float | None = None
    pace: float | None = None
    #: ``--early-stop`` and its block length in seconds, an exact fraction in text (None: the default).
    early_stop: bool = False
    early_stop_block: str | None = None

    def early_stop_options(self) -> EarlyStopOptions | None:
        if not self.early_stop:
            return None
        block = parse_cli_time(self.early_stop_block) if self.early_stop_block is not None else DEFAULT_BLOCK_S
        return EarlyStopOptions(block, self.seed, self.alpha)

    def filters(self) -> Filters:
        return Filters(case=self.case, targets=self.targets, at=tuple(parse_cli_time(t) for t in self.at),
                       from_s=parse_cli_time(self.from_s) if self.from_s is not None else None,
                       until_s=parse_cli_time(self.until_s) if self.until_s is not None else None)

    def trial_options(self, filters: Filters) -> TrialOptions:
        """What the engine needs of this request (``filters``: :meth:`filters`, parsed once)."""
        return TrialOptions(
            repeat=self.repeat, concurrency=self.concurrency, order=self.order, keep_going=self.keep_going,
            call_policy=CallPolicy(timeout_s=self.timeout_s, retries=self.retries, backoff_s=self.retry_backoff_s,
                                   max_calls_per_second=self.max_calls_per_second),
            gates=GateOptions(self.min_pass_rate, self.min_target_pass_rate, self.max_failures,
                              max_flaky_samples=self.max_flaky_samples, max_p95_latency_s=self.max_p95_latency_s,
                              max_cost=self.max_cost,
                              streams=StreamGates(self.min_recall, self.max_false_alarms_per_min,
                                                  self.max_detection_latency_p95_s)),
            filters=filters, adapter_config=dict(self.adapter_config or {}),
            artifacts_dir=Path(self.artifacts_dir) if self.artifacts_dir else None, verbose=self.verbose,
            pace=self.pace, early_stop=self.early_stop_options())

    def comparison(self) -> Comparison:
        return Comparison(self.fail_on_regression, self.fail_on_latency_regression_s, self.confidence, self.alpha)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json() | {"at": list(self.at), "arms": list(self.arms), "perturb": list(self.perturb)}
        # Arm options are recorded only when used, so a plain run's manifest is what it always was.
        for name, default in (_ARM_DEFAULTS | _EARLY_STOP_DEFAULTS).items():
            if data[name] == default:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: object, where: Path) -> RunRequest:
        if isinstance(data, Mapping) and isinstance(data.get("fail_on_regression"), bool):
            # Checkpoints of earlier versions recorded the flag; `any` is what it meant.
            data = {**data, "fail_on_regression": "any" if data["fail_on_regression"] else None}
        values = restore_fields(data, RUN_CHECKS, where, RUN_KIND)
        values["targets"] = tuple(values.get("targets") or ())
        values["at"] = tuple(values.get("at") or ())
        values["arms"] = tuple(values.get("arms") or ())
        values["perturb"] = tuple(values.get("perturb") or ())
        for name in ("at", "from_s", "until_s"):
            texts = values[name] if name == "at" else [values.get(name)]
            for text in texts:
                if text is not None and not _is_time(text):
                    raise CheckpointError(f"{where}: the manifest's invocation has an invalid {name} "
                                          f"({text!r}); start a new run")
        return cls(**values)


@dataclass(frozen=True)
class SeedRequest(AdapterRequest):
    #: The ``--adapter-config`` path (read again on resume); ``run`` records the loaded contents.
    adapter_config_path: str | None = None
    replace: bool = False
    #: The call policy, as ``run``'s (``--timeout`` or config.yaml ``run: timeout_s``, resolved once).
    timeout_s: float | None = None
    retries: int = 0
    retry_backoff_s: float = 1.0
    max_calls_per_second: float | None = None

    def trial_options(self) -> TrialOptions:
        return TrialOptions(concurrency=self.concurrency, keep_going=self.keep_going,
                            call_policy=CallPolicy(timeout_s=self.timeout_s, retries=self.retries,
                                                   backoff_s=self.retry_backoff_s,
                                                   max_calls_per_second=self.max_calls_per_second),
                            filters=Filters(case=self.case, targets=self.targets), verbose=self.verbose)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        # The call policy is recorded only when set, so a seed's manifest is what it always was.
        for name, default in _CALL_DEFAULTS.items():
            if data[name] == default:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: object, where: Path) -> SeedRequest:
        values = restore_fields(data, SEED_CHECKS, where, SEED_KIND)
        values["targets"] = tuple(values.get("targets") or ())
        return cls(**values)


def absolute(path: str | None) -> str | None:
    """``path`` made absolute for the manifest, without resolving links: ``/dev/stdout`` stays itself."""
    return None if path is None else str(Path(path).expanduser().absolute())


def time_text(value: Fraction | None) -> str | None:
    """A time as exact text (``"3/2"``), so a resume selects the same samples."""
    return None if value is None else str(value)


def restore_fields(data: object, checks: Mapping[str, Check], where: Path, kind: str) -> dict[str, Any]:
    """A recorded invocation's fields, each checked; refuses unknown, missing-required or bad ones."""
    if not isinstance(data, Mapping) or not isinstance(data.get("eval_dir"), str):
        raise CheckpointError(f"{where}: the manifest's invocation is missing or damaged; start a new {kind}")
    unknown = sorted(set(data) - set(checks))
    if unknown:
        raise CheckpointError(f"{where}: the manifest records options this version does not know "
                              f"({', '.join(unknown)}); resume it with the glasskit_eval that wrote it")
    bad = sorted(name for name, value in data.items() if not checks[name](value))
    if bad:
        raise CheckpointError(f"{where}: the manifest's invocation has invalid values for "
                              f"{', '.join(bad)}; start a new {kind}")
    return dict(data)


# -- value checks ---------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _one_of(choices: tuple[str, ...]) -> Check:
    return lambda value: value in choices


def is_str(value: object) -> bool:
    return isinstance(value, str)


def is_bool(value: object) -> bool:
    return isinstance(value, bool)


def positive_int(value: object) -> bool:
    return _is_int(value) and value >= 1  # type: ignore[operator]


def count(value: object) -> bool:
    return _is_int(value) and value >= 0  # type: ignore[operator]


def rate(value: object) -> bool:
    return _is_number(value) and 0.0 <= value <= 1.0  # type: ignore[operator]


def positive_number(value: object) -> bool:
    return _is_number(value) and value > 0  # type: ignore[operator]


def pace_ok(value: object) -> bool:
    return _is_number(value) and MIN_PACE <= value <= MAX_PACE  # type: ignore[operator]


def nonnegative_number(value: object) -> bool:
    return _is_number(value) and value >= 0  # type: ignore[operator]


def open_fraction(value: object) -> bool:
    return _is_number(value) and 0.0 < value < 1.0  # type: ignore[operator]


def str_list(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def is_shard(value: object) -> bool:
    """``I/N`` with 1 <= I <= N (a resolved ``--shard``)."""
    if not isinstance(value, str):
        return False
    try:
        parse_shard(value)
    except UsageError:
        return False
    return True


def _is_time(text: str) -> bool:
    try:
        return parse_cli_time(text) >= 0
    except ValueError:
        return False


opt_str = _optional(is_str)

COMMON_CHECKS: dict[str, Check] = {
    "eval_dir": is_str, "adapter": opt_str, "adapter_command": opt_str, "case": opt_str,
    "targets": str_list, "concurrency": positive_int, "keep_going": is_bool, "verbose": is_bool,
    "checkpoint_dir": opt_str,
}

RUN_CHECKS: dict[str, Check] = COMMON_CHECKS | {
    "adapter_config_path": opt_str, "adapter_config": _optional(lambda v: isinstance(v, dict)),
    "at": str_list, "from_s": opt_str, "until_s": opt_str, "repeat": positive_int,
    "min_pass_rate": _optional(rate), "min_target_pass_rate": _optional(rate),
    "max_failures": _optional(count), "max_flaky_samples": _optional(count),
    "output_json": opt_str, "artifacts_dir": opt_str, "save_failures": is_bool, "allow_empty": is_bool,
    "html": opt_str, "html_budget_mb": _optional(count), "keep_checkpoints": count,
    "cache_dir": opt_str, "cache_mode": _one_of(CACHE_MODES), "cache_max_mb": positive_int,
    "strict_pins": is_bool, "timeout_s": _optional(positive_number), "retries": count,
    "retry_backoff_s": nonnegative_number, "max_calls_per_second": _optional(positive_number),
    "adapter_http": opt_str, "adapter_exec": opt_str, "max_p95_latency_s": _optional(nonnegative_number),
    "max_cost": _optional(nonnegative_number), "order": _one_of(ORDERS),
    "junit_xml": opt_str, "annotations": _one_of(ANNOTATION_MODES), "baseline": opt_str,
    "fail_on_regression": _optional(_one_of(REGRESSION_MODES)),
    "fail_on_latency_regression_s": _optional(nonnegative_number),
    "confidence": open_fraction, "alpha": open_fraction, "shard": _optional(is_shard),
    "arms": str_list, "perturb": str_list, "control": opt_str, "seed": _is_int, "gate_arm": opt_str,
    "max_robustness_drop": _optional(rate), "jitter_frames": count, "max_blind_pass_rate": _optional(rate),
    "min_recall": _optional(rate), "max_false_alarms_per_min": _optional(nonnegative_number),
    "max_detection_latency_p95_s": _optional(nonnegative_number), "pace": _optional(pace_ok),
    "early_stop": is_bool, "early_stop_block": _optional(lambda v: isinstance(v, str) and _is_time(v)),
}

#: ``--early-stop``'s fields: left out of a manifest while unused, as the arm options are.
_EARLY_STOP_DEFAULTS: dict[str, Any] = {"early_stop": False, "early_stop_block": None}

#: The arm options' defaults: left out of a manifest while unused.
_ARM_DEFAULTS: dict[str, Any] = {"arms": [], "perturb": [], "control": None, "seed": 0, "gate_arm": None,
                                 "max_robustness_drop": None, "jitter_frames": 0, "max_blind_pass_rate": None}

_CALL_DEFAULTS: dict[str, Any] = {"timeout_s": None, "retries": 0, "retry_backoff_s": 1.0,
                                  "max_calls_per_second": None}

SEED_CHECKS: dict[str, Check] = COMMON_CHECKS | {
    "adapter_config_path": opt_str, "replace": is_bool, "timeout_s": _optional(positive_number), "retries": count,
    "retry_backoff_s": nonnegative_number, "max_calls_per_second": _optional(positive_number)}
