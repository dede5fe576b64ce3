"""One ``run`` invocation as frozen data, independent of argparse; stored in the checkpoint manifest."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..checkpoints import lifecycle as lc
from ..checkpoints.lifecycle import AdapterRequest, restore_fields
from ..errors import CheckpointError
from ..plan.schedule import Filters
from .ci_options import CHECKS as CI_CHECKS
from .gates import GateOptions

if TYPE_CHECKING:
    from ..adapters.resilient import CallPolicy

KIND = "run"


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
    #: CI outputs (issue 18): JUnit XML path, annotation mode, baseline report, shard ``I/N``.
    junit_xml: str | None = None
    annotations: str = "auto"
    baseline: str | None = None
    fail_on_regression: bool = False
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

    def call_policy(self) -> CallPolicy:
        from ..adapters.resilient import CallPolicy

        return CallPolicy(timeout_s=self.timeout_s, retries=self.retries, backoff_s=self.retry_backoff_s,
                          max_calls_per_second=self.max_calls_per_second)
    #: ``declaration`` (target by target, as the adapter reference says) or ``time``.
    order: str = "declaration"

    def filters(self) -> Filters:
        return Filters(case=self.case, targets=self.targets, at=tuple(Fraction(t) for t in self.at),
                       from_s=Fraction(self.from_s) if self.from_s is not None else None,
                       until_s=Fraction(self.until_s) if self.until_s is not None else None)

    def gate_options(self) -> GateOptions:
        return GateOptions(self.min_pass_rate, self.min_target_pass_rate, self.max_failures)

    def to_json(self) -> dict[str, Any]:
        return super().to_json() | {"at": list(self.at)}

    @classmethod
    def from_json(cls, data: object, where: Path) -> RunRequest:
        values = restore_fields(data, _CHECKS, where, KIND)
        values["targets"] = tuple(values.get("targets") or ())
        values["at"] = tuple(values.get("at") or ())
        for name in ("at", "from_s", "until_s"):
            texts = values[name] if name == "at" else [values.get(name)]
            for text in texts:
                if text is not None and not _is_time(text):
                    raise CheckpointError(f"{where}: the manifest's invocation has an invalid {name} "
                                          f"({text!r}); start a new run")
        return cls(**values)


def time_text(value: Fraction | None) -> str | None:
    return None if value is None else str(value)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def opt_positive_number(value: object) -> bool:
    return value is None or (_number(value) and value > 0)  # type: ignore[operator]


def nonnegative_number(value: object) -> bool:
    return _number(value) and value >= 0  # type: ignore[operator]


def opt_nonnegative_number(value: object) -> bool:
    return value is None or nonnegative_number(value)


def count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_time(text: str) -> bool:
    try:
        return Fraction(text) >= 0
    except (ValueError, ZeroDivisionError):
        return False


def _is_cache_mode(value: object) -> bool:
    return value in ("read", "write", "readwrite")


_CHECKS = lc.COMMON_CHECKS | {
    "adapter_config_path": lc.opt_str, "adapter_config": lc.opt_object, "at": lc.str_list,
    "from_s": lc.opt_str, "until_s": lc.opt_str, "repeat": lc.positive_int, "min_pass_rate": lc.opt_rate,
    "min_target_pass_rate": lc.opt_rate, "max_failures": lc.opt_count, "max_flaky_samples": lc.opt_count,
    "output_json": lc.opt_str, "artifacts_dir": lc.opt_str, "save_failures": lc.is_bool,
    "allow_empty": lc.is_bool,
    "html": lc.opt_str, "html_budget_mb": lc.opt_count,
    "keep_checkpoints": lambda value: value is not None and lc.opt_count(value),
    "cache_dir": lc.opt_str, "cache_mode": _is_cache_mode, "cache_max_mb": lc.positive_int,
    "strict_pins": lc.is_bool,
    "timeout_s": opt_positive_number, "retries": count, "retry_backoff_s": nonnegative_number,
    "max_calls_per_second": opt_positive_number, "adapter_http": lc.opt_str, "adapter_exec": lc.opt_str,
    "max_p95_latency_s": opt_nonnegative_number, "max_cost": opt_nonnegative_number,
    "order": lambda value: value in ("declaration", "time"),
}
_CHECKS.update(CI_CHECKS)
