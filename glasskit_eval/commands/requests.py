"""Each checkpointed command's invocation as frozen data, and every check of a recorded one.

A request is what the command line asked for, independent of argparse: a few fields that say
which adapter runs where, and one frozen group per argparse option group (gates, comparison,
call policy, arms, outputs, ...), each built by the face from its group. ``run`` and ``seed``
store theirs in the checkpoint manifest as one flat JSON object (each group's fields under their
own names), and a resume restores it group by group: every field carries its check
(:mod:`.recorded`), :func:`restore` applies them, then each group's ``verify`` what spans
fields, so a hand-edited manifest (``concurrency: 0``, ``repeat: -3``) is a
:class:`~glasskit_eval.errors.CheckpointError`, never a hang or a false success. The engine
never sees a request: ``run`` turns one into :class:`~glasskit_eval.evaluation.options.TrialOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..adapters.resilient import CallPolicy
from ..cases.model import STREAM_GATE_NAMES, StreamGates
from ..errors import CheckpointError, UsageError
from ..evaluation.earlystop import EarlyStopOptions
from ..evaluation.gates import GateOptions
from ..evaluation.options import TrialOptions
from ..plan.blocks import DEFAULT_BLOCK_S
from ..plan.schedule import Filters
from ..support.timevalues import parse_cli_time
from .recorded import (
    Check,
    build,
    checks_of,
    count,
    flat_fields,
    flat_values,
    group,
    is_bool,
    is_int,
    is_shard,
    is_str,
    is_time,
    nonnegative_number,
    one_of,
    open_fraction,
    opt_str,
    option,
    optional,
    pace_ok,
    perturb_list,
    positive_int,
    positive_number,
    rate,
    restore_fields,
    str_list,
)

#: The checkpoint kinds (``runs/checkpoints/<kind>-...``).
RUN_KIND = "run"
SEED_KIND = "seed"

ANNOTATION_MODES = ("auto", "github", "none")
CACHE_MODES = ("read", "write", "readwrite")
ORDERS = ("declaration", "time")
REGRESSION_MODES = ("any", "significant")

R = TypeVar("R", bound="AdapterRequest")


# -- the option groups, one per argparse group -------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallOptions:
    """Timeouts, retries and the rate limit of adapter calls (``call_options``: run and seed)."""

    #: Per-call timeout in seconds (``--timeout`` or config.yaml ``run: timeout_s``, resolved once).
    timeout_s: float | None = option(None, optional(positive_number))
    retries: int = option(0, count)
    retry_backoff_s: float = option(1.0, nonnegative_number)
    max_calls_per_second: float | None = option(None, optional(positive_number))

    def policy(self) -> CallPolicy:
        return CallPolicy(timeout_s=self.timeout_s, retries=self.retries, backoff_s=self.retry_backoff_s,
                          max_calls_per_second=self.max_calls_per_second)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which samples run beyond ``--case``/``--target`` (``time_options``, ``--allow-empty``)."""

    #: Times as exact fractions in text (``"3/2"``), so a resume selects the same samples.
    at: tuple[str, ...] = option((), str_list)
    from_s: str | None = option(None, opt_str)
    until_s: str | None = option(None, opt_str)
    allow_empty: bool = option(False, is_bool)

    def verify(self, where: Path, kind: str) -> None:
        for name, texts in (("at", self.at), ("from_s", (self.from_s,)), ("until_s", (self.until_s,))):
            for text in texts:
                if text is not None and not is_time(text):
                    raise CheckpointError(f"{where}: the manifest's invocation has an invalid {name} "
                                          f"({text!r}); start a new {kind}")


@dataclass(frozen=True, slots=True)
class Trials:
    """How the selected samples are played: how often, in which order, on which clock."""

    repeat: int = option(1, positive_int)
    #: ``declaration`` (target by target, as the adapter reference says) or ``time``.
    order: str = option("declaration", one_of(ORDERS))
    #: ``--pace``: stream targets on the paced clock (None: replay).
    pace: float | None = option(None, optional(pace_ok))


@dataclass(frozen=True, slots=True)
class Gates:
    """The gates the command line sets (``gate_options``); each one given wins over its config.yaml key.

    The fields are :class:`~glasskit_eval.evaluation.gates.GateOptions`' with its stream gates
    flattened, so the engine's record is made without naming a gate (:meth:`options`).
    """

    min_pass_rate: float | None = option(None, optional(rate))
    min_target_pass_rate: float | None = option(None, optional(rate))
    max_failures: int | None = option(None, optional(count))
    max_flaky_samples: int | None = option(None, optional(count))
    max_p95_latency_s: float | None = option(None, optional(nonnegative_number))
    max_cost: float | None = option(None, optional(nonnegative_number))
    #: Stream gates applied to every stream target.
    min_recall: float | None = option(None, optional(rate))
    max_false_alarms_per_min: float | None = option(None, optional(nonnegative_number))
    max_detection_latency_p95_s: float | None = option(None, optional(nonnegative_number))

    def options(self) -> GateOptions:
        """What the engine gates on."""
        values = flat_values(self)
        streams = StreamGates(**{name: values.pop(name) for name in STREAM_GATE_NAMES})
        return GateOptions(**values, streams=streams)


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a run is judged against a baseline report (``run``, ``merge-reports``, ``compare``)."""

    #: ``any``, ``significant`` or None (``--fail-on-regression``).
    fail_on_regression: str | None = option(None, optional(one_of(REGRESSION_MODES)))
    #: ``--fail-on-latency-regression``: seconds the median latency may surely grow by.
    fail_on_latency_regression_s: float | None = option(None, optional(nonnegative_number))
    #: ``--confidence`` of every interval and ``--alpha`` of every test.
    confidence: float = option(0.95, open_fraction)
    alpha: float = option(0.05, open_fraction)


@dataclass(frozen=True, slots=True)
class CiOutputs:
    """The CI outputs group: JUnit XML path, annotation mode, baseline report, shard ``I/N``."""

    junit_xml: str | None = option(None, opt_str)
    annotations: str = option("auto", one_of(ANNOTATION_MODES))
    baseline: str | None = option(None, opt_str)
    #: Resolved when the run starts (``--shard auto`` reads the CI's variables then), so a
    #: resume runs the same part.
    shard: str | None = option(None, optional(is_shard))


@dataclass(frozen=True, slots=True)
class Outputs:
    """What a run writes besides the console: reports, failure artifacts, kept checkpoints."""

    output_json: str | None = option(None, opt_str)
    artifacts_dir: str | None = option(None, opt_str)
    save_failures: bool = option(False, is_bool)
    #: ``--html``: the self-contained HTML report to write, with thumbnails of failed frames.
    html: str | None = option(None, opt_str)
    #: ``--html-budget-mb``: embedded thumbnails' size budget; beyond it they link to artifacts.
    html_budget_mb: int = option(25, optional(count))
    #: Completed run checkpoints kept when the run ends; 0 keeps all.
    keep_checkpoints: int = option(10, count)


@dataclass(frozen=True, slots=True)
class CacheOptions:
    """The observation cache (``--cache``, ``--cache-mode``, ``--cache-max-mb``)."""

    #: Observation cache directory (``--cache``); None: off.
    cache_dir: str | None = option(None, opt_str)
    cache_mode: str = option("readwrite", one_of(CACHE_MODES))
    cache_max_mb: int = option(512, positive_int)


@dataclass(frozen=True, slots=True)
class ArmOptions:
    """The arms group (``arm_options``): arms side by side on the same frames."""

    #: ``--arm`` (``NAME`` or ``NAME=PATH``, the path absolute) and ``--perturb`` specs, as given.
    arms: tuple[str, ...] = option((), str_list)
    perturb: tuple[str, ...] = option((), perturb_list)
    #: ``--control``: the arm the others are compared with (default: the plain adapter).
    control: str | None = option(None, opt_str)
    #: ``--seed``: seeds every perturbation's random choices.
    seed: int = option(0, is_int)
    #: ``--gate-arm``: only this arm's gates decide the run.
    gate_arm: str | None = option(None, opt_str)
    #: ``--max-robustness-drop``: how far a perturbation arm's pass rate may significantly fall.
    max_robustness_drop: float | None = option(None, optional(rate))
    #: ``--max-blind-pass-rate``: the most of the control's passes a blind arm may still pass.
    max_blind_pass_rate: float | None = option(None, optional(rate))
    #: ``--jitter-frames``: the control arm also judged on this many frames either side (0: off).
    jitter_frames: int = option(0, count)

    #: The options that compare arms, and so mean nothing without them.
    NEED_ARMS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("control", "--control"), ("gate_arm", "--gate-arm"), ("max_robustness_drop", "--max-robustness-drop"),
        ("max_blind_pass_rate", "--max-blind-pass-rate"))

    @property
    def used(self) -> bool:
        return bool(self.arms or self.perturb)

    def without_arms(self) -> list[tuple[str, str]]:
        """(name, option) of each option given that needs arms when none are (the one such check)."""
        if self.used:
            return []
        return [(name, flag) for name, flag in self.NEED_ARMS if getattr(self, name) is not None]

    def check(self) -> None:
        """Raise the usage error of an option that needs arms given without any."""
        for _name, flag in self.without_arms()[:1]:
            raise UsageError(f"{flag} needs arms to compare: add --arm NAME or --perturb SPEC")

    def verify(self, where: Path, kind: str) -> None:
        unused = [name for name, _flag in self.without_arms()]
        if unused:
            raise CheckpointError(f"{where}: the manifest's invocation has invalid values for "
                                  f"{', '.join(unused)}; start a new {kind}")


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """``--early-stop`` and its block length in seconds, an exact fraction in text (None: the default)."""

    early_stop: bool = option(False, is_bool)
    early_stop_block: str | None = option(None, optional(lambda v: isinstance(v, str) and is_time(v)))

    def options(self, seed: int, alpha: float) -> EarlyStopOptions | None:
        if not self.early_stop:
            return None
        block = parse_cli_time(self.early_stop_block) if self.early_stop_block is not None else DEFAULT_BLOCK_S
        return EarlyStopOptions(block, seed, alpha)


# -- the requests ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdapterRequest:
    """What every checkpointed adapter command records (``RunRequest``, ``SeedRequest`` add theirs)."""

    eval_dir: str = field(metadata={"check": is_str})
    adapter: str | None = option(None, opt_str)
    adapter_command: str | None = option(None, opt_str)
    #: The ``--adapter-config`` path (``run`` also records the loaded contents).
    adapter_config_path: str | None = option(None, opt_str)
    case: str | None = option(None, opt_str)
    targets: tuple[str, ...] = option((), str_list)
    concurrency: int = option(1, positive_int)
    keep_going: bool = option(False, is_bool)
    verbose: bool = option(False, is_bool)
    #: Where the checkpoint goes when the eval directory cannot be written (absolute once stored).
    checkpoint_dir: str | None = option(None, opt_str)
    calls: CallOptions = group(CallOptions)

    #: The checkpoint kind, named in a refused manifest's message.
    KIND: ClassVar[str] = ""
    #: Groups whose options are recorded only when set, so older manifests stay what they were.
    SPARSE: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def of(cls: type[R], **values: Any) -> R:
        """A request from options by their flat (manifest) names."""
        return build(cls, values)

    def replaced(self: R, **changes: Any) -> R:
        """This request with some options, by their flat names, changed."""
        return build(type(self), flat_values(self) | changes)

    def checkpoint_root(self) -> Path | None:
        return Path(self.checkpoint_dir) if self.checkpoint_dir else None

    def to_json(self) -> dict[str, Any]:
        """The manifest's flat object: every option under its own name, lists for tuples."""
        data: dict[str, Any] = {}
        for owner, f in flat_fields(type(self)):
            value = getattr(getattr(self, owner) if owner else self, f.name)
            if owner in self.SPARSE and value == f.default:
                continue
            data[f.name] = list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, dict) \
                else value
        return data

    @classmethod
    def from_json(cls: type[R], data: object, where: Path) -> R:
        return restore(cls, data, where)


@dataclass(frozen=True, slots=True)
class RunRequest(AdapterRequest):
    """Everything needed to repeat a run exactly (a resume restores it from the manifest)."""

    adapter_http: str | None = option(None, opt_str)
    adapter_exec: str | None = option(None, opt_str)
    #: The adapter config contents; recorded once loaded so a resume restores them exactly.
    adapter_config: dict[str, Any] | None = option(None, optional(lambda v: isinstance(v, dict)))
    #: Frame-lock mismatches are validation errors, not warnings.
    strict_pins: bool = option(False, is_bool)
    selection: Selection = group(Selection)
    trials: Trials = group(Trials)
    gates: Gates = group(Gates)
    comparison: Comparison = group(Comparison)
    ci: CiOutputs = group(CiOutputs)
    outputs: Outputs = group(Outputs)
    cache: CacheOptions = group(CacheOptions)
    arms: ArmOptions = group(ArmOptions)
    early: EarlyStop = group(EarlyStop)

    KIND: ClassVar[str] = RUN_KIND
    #: Arm and early-stop options are recorded only when used, so a plain run's manifest is what it
    #: always was.
    SPARSE: ClassVar[tuple[str, ...]] = ("arms", "early")

    def filters(self) -> Filters:
        s = self.selection
        return Filters(case=self.case, targets=self.targets, at=tuple(parse_cli_time(t) for t in s.at),
                       from_s=parse_cli_time(s.from_s) if s.from_s is not None else None,
                       until_s=parse_cli_time(s.until_s) if s.until_s is not None else None)

    def trial_options(self, filters: Filters) -> TrialOptions:
        """What the engine needs of this request (``filters``: :meth:`filters`, parsed once)."""
        return TrialOptions(
            repeat=self.trials.repeat, concurrency=self.concurrency, order=self.trials.order,
            keep_going=self.keep_going, call_policy=self.calls.policy(), gates=self.gates.options(),
            filters=filters, adapter_config=dict(self.adapter_config or {}),
            artifacts_dir=Path(self.outputs.artifacts_dir) if self.outputs.artifacts_dir else None,
            verbose=self.verbose, pace=self.trials.pace,
            early_stop=self.early.options(self.arms.seed, self.comparison.alpha))

    @classmethod
    def from_json(cls, data: object, where: Path) -> RunRequest:
        if isinstance(data, Mapping) and isinstance(data.get("fail_on_regression"), bool):
            # Checkpoints of earlier versions recorded the flag; `any` is what it meant.
            data = {**data, "fail_on_regression": "any" if data["fail_on_regression"] else None}
        return restore(cls, data, where)


@dataclass(frozen=True, slots=True)
class SeedRequest(AdapterRequest):
    replace: bool = option(False, is_bool)

    KIND: ClassVar[str] = SEED_KIND
    #: The call policy is recorded only when set, so a seed's manifest is what it always was.
    SPARSE: ClassVar[tuple[str, ...]] = ("calls",)

    def trial_options(self) -> TrialOptions:
        return TrialOptions(concurrency=self.concurrency, keep_going=self.keep_going, call_policy=self.calls.policy(),
                            filters=Filters(case=self.case, targets=self.targets), verbose=self.verbose)


def restore(kind: type[R], data: object, where: Path) -> R:
    """A recorded request, checked option by option, then group by group (:meth:`verify`)."""
    request = build(kind, restore_fields(data, checks_of(kind), where, kind.KIND))
    for f in fields(kind):
        verify = getattr(getattr(request, f.name), "verify", None) if "group" in f.metadata else None
        if verify is not None:
            verify(where, kind.KIND)
    return request


def absolute(path: str | None) -> str | None:
    """``path`` made absolute for the manifest, without resolving links: ``/dev/stdout`` stays itself."""
    return None if path is None else str(Path(path).expanduser().absolute())


def time_text(value: Fraction | None) -> str | None:
    """A time as exact text (``"3/2"``), so a resume selects the same samples."""
    return None if value is None else str(value)


COMMON_CHECKS: dict[str, Check] = checks_of(AdapterRequest)
RUN_CHECKS: dict[str, Check] = checks_of(RunRequest)
SEED_CHECKS: dict[str, Check] = checks_of(SeedRequest)
