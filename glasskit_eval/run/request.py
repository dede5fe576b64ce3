"""One ``run`` invocation as frozen data, independent of argparse; stored in the checkpoint manifest."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..checkpoints.lifecycle import (
    is_bool,
    is_str,
    opt_count,
    opt_object,
    opt_rate,
    opt_str,
    positive_int,
    restore_fields,
    str_list,
)
from ..errors import CheckpointError
from ..plan.schedule import Filters
from .gates import GateOptions

KIND = "run"


@dataclass(frozen=True)
class RunRequest:
    """Everything needed to repeat a run exactly (a resume restores it from the manifest)."""

    eval_dir: str
    adapter: str | None = None
    adapter_command: str | None = None
    adapter_config_path: str | None = None
    #: The adapter config contents; recorded once loaded so a resume restores them exactly.
    adapter_config: dict[str, Any] | None = None
    case: str | None = None
    targets: tuple[str, ...] = ()
    #: Times as exact fractions in text (``"3/2"``), so a resume selects the same samples.
    at: tuple[str, ...] = ()
    from_s: str | None = None
    until_s: str | None = None
    concurrency: int = 1
    repeat: int = 1
    min_pass_rate: float | None = None
    min_target_pass_rate: float | None = None
    max_failures: int | None = None
    max_flaky_samples: int | None = None
    keep_going: bool = False
    verbose: bool = False
    output_json: str | None = None
    artifacts_dir: str | None = None
    save_failures: bool = False
    allow_empty: bool = False
    #: ``declaration`` (target by target, as the adapter reference says) or ``time``.
    order: str = "declaration"

    def filters(self) -> Filters:
        return Filters(case=self.case, targets=self.targets, at=tuple(Fraction(t) for t in self.at),
                       from_s=Fraction(self.from_s) if self.from_s is not None else None,
                       until_s=Fraction(self.until_s) if self.until_s is not None else None)

    def gate_options(self) -> GateOptions:
        return GateOptions(self.min_pass_rate, self.min_target_pass_rate, self.max_failures)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        data["at"] = list(self.at)
        return data

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


def _is_time(text: str) -> bool:
    try:
        return Fraction(text) >= 0
    except (ValueError, ZeroDivisionError):
        return False


_CHECKS = {
    "eval_dir": is_str, "adapter": opt_str, "adapter_command": opt_str, "adapter_config_path": opt_str,
    "adapter_config": opt_object, "case": opt_str, "targets": str_list, "at": str_list,
    "from_s": opt_str, "until_s": opt_str, "concurrency": positive_int, "repeat": positive_int,
    "min_pass_rate": opt_rate, "min_target_pass_rate": opt_rate, "max_failures": opt_count,
    "max_flaky_samples": opt_count, "keep_going": is_bool, "verbose": is_bool, "output_json": opt_str,
    "artifacts_dir": opt_str, "save_failures": is_bool, "allow_empty": is_bool,
    "order": lambda value: value in ("declaration", "time"),
}
