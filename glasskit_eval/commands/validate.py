"""``validate``: check an eval directory (and optionally construct its adapter) without evaluating."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..cases.evaldir import load_adapter_config, misnamed_yml_problems
from ..errors import AdapterError, EvalError, Interrupted, UsageError, ValidationError
from ..plan.pinfiles import any_pinned
from ..plan.planning import Plan, build_plan, undeclared_gate_targets
from ..plan.schedule import Filters
from ..plan.videos import video_resolver


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """What ``validate`` found."""

    passed: bool
    root: Path | None
    sample_count: int
    #: Problems (failed) or per-video descriptions (passed, when asked for).
    details: tuple[str, ...]
    hint: str | None = None
    #: Frame-lock findings that do not fail validation (without --strict-pins).
    warnings: tuple[str, ...] = ()
    #: Events of the selected stream targets.
    event_count: int = 0

    def lines(self) -> list[str]:
        if not self.passed:
            out = ["Validation failed", *(f"- {line}" for line in self.details)]
            return out + ([self.hint] if self.hint else [])
        events = f", {self.event_count} events" if self.event_count else ""
        return [f"Validation passed: {self.root} ({self.sample_count} samples{events})", *self.details,
                *self.warnings]


def execute_validate(eval_dir: str | Path, filters: Filters, out: TextIO, err: TextIO, *, allow_empty: bool,
                     adapter: str | None, adapter_command: str | None, adapter_config: str | None,
                     describe_videos: bool, pin: bool, strict_pins: bool) -> bool:
    """Print what validation found; True when it passed."""
    report = validate(eval_dir, filters, allow_empty=allow_empty, adapter=adapter, adapter_command=adapter_command,
                      adapter_config=adapter_config, describe_videos=describe_videos, stderr=err, pin=pin,
                      strict_pins=strict_pins)
    for line in report.lines():
        print(line, file=out)
    return report.passed


def validate(eval_dir: str | Path, filters: Filters, *, allow_empty: bool, adapter: str | None = None,
             adapter_command: str | None = None, adapter_config: str | None = None,
             describe_videos: bool = False, stderr: TextIO, pin: bool = False,
             strict_pins: bool = False) -> ValidationReport:
    """Every check ``run`` makes before its first adapter call; usage errors are raised, not reported."""
    try:
        plan = build_plan(eval_dir, filters, allow_empty=allow_empty,
                          resolve_video=video_resolver(lambda message: print(message, file=stderr)))
        if adapter is not None or adapter_command is not None:
            _check_adapter(adapter, adapter_command, adapter_config, plan.eval_dir.root, stderr)
        elif adapter_config is None:
            # `run` would refuse it when it looks for adapter.yaml; say so before it gets there.
            stray = misnamed_yml_problems(plan.eval_dir.root, "adapter")
            if stray:
                raise ValidationError(stray, hint="Or pass it explicitly with --adapter-config.")
        pin_lines = _pin(plan) if pin else _check_pins(plan, strict_pins)
    except (UsageError, Interrupted):
        raise
    except ValidationError as exc:
        return ValidationReport(False, None, 0, tuple(str(p) for p in exc.problems) or (str(exc),), exc.hint)
    except EvalError as exc:
        return ValidationReport(False, None, 0, (str(exc),))

    for target, why in undeclared_gate_targets(plan, filters).items():
        # Valid YAML, but `run` will fail this gate: say so now.
        print(f"warning: gate eval_{target}_min_pass_rate will fail: {why}", file=stderr)
    details: list[str] = []
    if describe_videos:
        # The decoder and Pillow: only for --describe-videos.
        from ..video.frames import stream_orientation

        for case_plan in plan.cases:
            if case_plan.video is not None:
                orientation = stream_orientation(case_plan.video_path)
                details.append(f"  {case_plan.case.name}: {case_plan.video.describe()}, {orientation.describe()}")
    return ValidationReport(True, plan.eval_dir.root, plan.sample_count, tuple(details), warnings=pin_lines,
                            event_count=plan.event_count)


def _check_pins(plan: Plan, strict: bool) -> tuple[str, ...]:
    if not any_pinned(c.case for c in plan.cases):
        return ()
    # Frame locks hash decoded pixels: the decoder, Pillow and hashlib only for an eval that has them.
    from ..plan.pinning import check_plan, raise_strict


    check = check_plan(plan)
    if strict:
        raise_strict(check)
    return tuple(check.warning_lines())


def _pin(plan: Plan) -> tuple[str, ...]:
    """``--pin``: write each selected case's lock; the lines say what changed since the last one."""
    # As in _check_pins.
    from ..plan.pinning import pin_case

    lines = []
    for case_plan in plan.cases:
        if not case_plan.samples:
            continue
        path, changes = pin_case(case_plan)
        lines.append(f"Pinned {len(case_plan.samples)} samples of {case_plan.case.name} in {path}")
        lines += [f"  re-pinned: {c.message}" for c in changes]
    return tuple(lines)


def _check_adapter(adapter: str | None, adapter_command: str | None, adapter_config: str | None,
                   root: Path, stderr: TextIO) -> None:
    """Construct and close the adapter once, as a trial would."""
    # Here, not at the top: asyncio brings ssl, which a `validate` of local videos without an
    # adapter does not pay for (tests/test_startup.py); the adapter protocol neither.
    import asyncio

    from ..adapters.base import FactoryConfig
    from ..adapters.choose import adapter_spec
    from ..support.interrupts import interruptible

    spec = adapter_spec(adapter, adapter_command, root, stderr)
    config = FactoryConfig(eval_dir=root, config=load_adapter_config(root, adapter_config))

    async def check() -> None:
        evaluator = await spec.create(config)
        await evaluator.close()

    try:
        # As in `run`: Ctrl+C abandons a slow import or factory, a second one exits at once.
        asyncio.run(interruptible(check()))
    except AdapterError as exc:
        raise AdapterError(f"adapter validation failed: {exc}") from None
