"""``validate``: check an eval directory (and optionally construct its adapter) without evaluating."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..errors import AdapterError, EvalError, UsageError, ValidationError
from .schedule import Filters


@dataclass(frozen=True)
class ValidationReport:
    passed: bool
    root: Path | None
    sample_count: int
    #: Problems (failed) or per-video descriptions (passed, when asked for).
    details: tuple[str, ...]
    hint: str | None = None

    def lines(self) -> list[str]:
        if not self.passed:
            out = ["Validation failed", *(f"- {line}" for line in self.details)]
            return out + ([self.hint] if self.hint else [])
        return [f"Validation passed: {self.root} ({self.sample_count} samples)", *self.details]


def validate(eval_dir: str | Path, filters: Filters, *, allow_empty: bool, adapter: str | None = None,
             adapter_command: str | None = None, adapter_config: str | None = None,
             describe_videos: bool = False, stderr: TextIO) -> ValidationReport:
    """Every check ``run`` makes before its first adapter call; usage errors are raised, not reported."""
    from ..store.videos import video_resolver
    from .planning import build_plan

    try:
        plan = build_plan(eval_dir, filters, allow_empty=allow_empty,
                          resolve_video=video_resolver(lambda message: print(message, file=stderr)))
        if adapter is not None or adapter_command is not None:
            _check_adapter(adapter, adapter_command, adapter_config, plan.eval_dir.root, stderr)
        elif adapter_config is None:
            from ..cases.evaldir import misnamed_yml_problems

            # `run` would refuse it when it looks for adapter.yaml; say so before it gets there.
            stray = misnamed_yml_problems(plan.eval_dir.root, "adapter")
            if stray:
                raise ValidationError(stray, hint="Or pass it explicitly with --adapter-config.")
    except UsageError:
        raise
    except ValidationError as exc:
        return ValidationReport(False, None, 0, tuple(str(p) for p in exc.problems) or (str(exc),), exc.hint)
    except EvalError as exc:
        return ValidationReport(False, None, 0, (str(exc),))
    from .planning import undeclared_gate_targets

    for target, why in undeclared_gate_targets(plan, filters).items():
        # Valid YAML, but `run` will fail this gate: say so now.
        print(f"warning: gate eval_{target}_min_pass_rate will fail: {why}", file=stderr)
    details: list[str] = []
    if describe_videos:
        from ..video.frames import stream_orientation

        for case_plan in plan.cases:
            if case_plan.video is not None:
                orientation = stream_orientation(case_plan.video_path)
                details.append(f"  {case_plan.case.name}: {case_plan.video.describe()}, {orientation.describe()}")
    return ValidationReport(True, plan.eval_dir.root, plan.sample_count, tuple(details))


def _check_adapter(adapter: str | None, adapter_command: str | None, adapter_config: str | None,
                   root: Path, stderr: TextIO) -> None:
    """Construct and close the adapter once, as a trial would."""
    import asyncio

    from ..adapters.base import FactoryConfig
    from ..adapters.choose import adapter_spec
    from ..cases.evaldir import load_adapter_config

    spec = adapter_spec(adapter, adapter_command, root, stderr)
    config = FactoryConfig(eval_dir=root, config=load_adapter_config(root, adapter_config))

    async def check() -> None:
        evaluator = await spec.create(config)
        await evaluator.close()

    try:
        asyncio.run(check())
    except AdapterError as exc:
        raise AdapterError(f"adapter validation failed: {exc}") from None
