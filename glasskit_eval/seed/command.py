"""The ``seed`` command: checkpointed adapter calls, then one minimal-diff write per case."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..adapters.base import AdapterSpec, FactoryConfig
from ..cases.evaldir import load_adapter_config
from ..cases.model import parse_case
from ..checkpoints.fingerprints import VideoDigests, describe_changes
from ..checkpoints.store import COMPLETE, Checkpoint, CheckpointError, resolve
from ..errors import EvalError, ExitCode, UsageError, ValidationError
from ..plan.planning import Plan, build_plan
from ..plan.schedule import Filters
from ..reports.console import compact
from ..results import ERROR, SampleResult
from ..run.case import CaseWork, SampleFailure, run_case
from ..run.reuse import plan_fingerprints
from ..support import threads
from .proposals import CaseEdits, extract_judge, needs_seed, plan_edits

RESUME_COMMAND = "python -m glasskit_eval seed --resume"


@dataclass(frozen=True)
class SeedRequest:
    eval_dir: str
    adapter: str | None = None
    adapter_command: str | None = None
    case: str | None = None
    targets: tuple[str, ...] = ()
    adapter_config: str | None = None
    concurrency: int = 1
    replace: bool = False
    keep_going: bool = False
    verbose: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        return data

    @classmethod
    def from_json(cls, data: Any, where: Path) -> SeedRequest:
        try:
            values = dict(data)
            values["targets"] = tuple(values.get("targets") or ())
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{where} does not hold a seed invocation ({exc}); start a new seed") from None


def _adapter_spec(request: SeedRequest, eval_dir: Path, err: TextIO) -> AdapterSpec:
    if request.adapter_command is not None:
        from ..adapters.process import CommandAdapterSpec

        return CommandAdapterSpec(request.adapter_command, stderr=err)
    from ..adapters.python import PythonAdapterSpec, default_target

    return PythonAdapterSpec(request.adapter or default_target(eval_dir))


def _absolute_adapter(target: str | None) -> str | None:
    if target is None:
        return None
    module, sep, attr = target.rpartition(":")
    if sep and (module.endswith(".py") or "/" in module):
        return f"{Path(module).expanduser().resolve()}:{attr}"
    return target


class _Seeder:
    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.checkpoint: Checkpoint | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def resume_hint(self) -> str | None:
        cp = self.checkpoint
        if cp is None:
            return None
        reusable = any(p.get("status") != ERROR for p in cp.previous.values()) or cp.durable_completed > 0
        if not reusable:
            return None
        return f"Checkpoint: {cp.path}\nResume with `{RESUME_COMMAND} {cp.path}`."

    def finish_checkpoint(self, complete: bool) -> None:
        cp = self.checkpoint
        if cp is None:
            return
        cp.close()
        if complete:
            cp.set_status(COMPLETE)
        elif self.resume_hint() is None:
            cp.discard()

    def run(self, request: SeedRequest | None, resume: str | None) -> int:
        if resume is not None:
            path = resolve(resume, Path(request.eval_dir if request else "eval").expanduser().resolve())
            self.checkpoint = Checkpoint.open(path, "seed")
            request = SeedRequest.from_json(self.checkpoint.manifest.invocation, path)
        assert request is not None
        filters = Filters(case=request.case, targets=request.targets)
        digests = VideoDigests()  # hashed on a thread while planning reads frame tables
        plan = build_plan(request.eval_dir, filters, allow_empty=True, allow_drafts=True,
                          on_video=digests.start)
        if self.checkpoint is not None:
            changes = describe_changes(self.checkpoint.manifest.fingerprints,
                                       plan_fingerprints(plan, request.case, digests))
            if changes:
                raise CheckpointError("cannot resume: inputs changed since the checkpoint was written:\n"
                                      + "\n".join(f"  - {c}" for c in changes))
        previous = self.checkpoint.previous if self.checkpoint else {}
        proposals: dict[str, dict[int, Any]] = {}
        pending: dict[str, list[Any]] = {}
        for case_plan in plan.cases:
            mine: dict[int, Any] = {}
            todo = []
            for s in case_plan.samples:
                if not needs_seed(s, request.replace):
                    continue
                payload = previous.get((1, s.case.name, s.target.id, s.sample_index))
                if payload is not None and payload.get("status") != ERROR:
                    mine[s.sample_index] = payload.get("observed_value")
                else:
                    todo.append(s)
            proposals[case_plan.case.name] = mine
            pending[case_plan.case.name] = todo
        total = sum(len(v) for v in pending.values()) + sum(len(v) for v in proposals.values())
        if total == 0:
            self.say(f"Nothing to seed in {plan.eval_dir.root}: every selected expectation is present "
                     "(use --replace to propose new values for them).")
            return ExitCode.OK
        if self.checkpoint is None and any(pending.values()):
            # Stored with absolute paths so `seed --resume` works from any directory.
            stored = replace(request, eval_dir=str(plan.eval_dir.root), adapter=_absolute_adapter(request.adapter),
                             adapter_config=(str(Path(request.adapter_config).expanduser().resolve())
                                             if request.adapter_config else None))
            self.checkpoint = Checkpoint.create(plan.eval_dir.root, "seed", stored.to_json(),
                                                plan_fingerprints(plan, request.case, digests), total)
        errors = asyncio.run(self._evaluate(plan, request, pending, proposals))
        if errors:
            for r in errors:
                self.say(f"  ERROR {r.case}/{r.target} @{format_time_float(r.timestamp_s)}s {r.reason}")
            self.say(f"Seed incomplete: {len(errors)} expectations could not be proposed; case files "
                     "were left unchanged.")
            hint = self.resume_hint()
            if hint:
                self.say(hint)
            self.finish_checkpoint(complete=False)
            return ExitCode.FAILED
        self._write(plan, proposals, request)
        self.finish_checkpoint(complete=True)
        return ExitCode.OK

    async def _evaluate(self, plan: Plan, request: SeedRequest, pending: dict[str, list[Any]],
                        proposals: dict[str, dict[int, Any]]) -> list[SampleResult]:
        if not any(pending.values()):
            return []
        from ..support.interrupts import interruptible

        spec = _adapter_spec(request, plan.eval_dir.root, self.err)
        config = FactoryConfig(eval_dir=plan.eval_dir.root,
                               config=load_adapter_config(plan.eval_dir.root, request.adapter_config),
                               verbose=request.verbose)
        checkpoint = self.checkpoint
        assert checkpoint is not None
        errors: list[SampleResult] = []

        def sink(result: SampleResult) -> None:
            checkpoint.append((1, result.case, result.target, result.sample_index), result.to_json(),
                              completed=result.status != ERROR)
            if request.verbose and result.status != ERROR:
                self.say(f"  {result.case}/{result.target} @{format_time_float(result.timestamp_s)}s "
                         f"-> {compact(result.observed_value)}")

        async def work() -> None:
            threads.install()
            evaluator = await spec.create(config)
            try:
                for case_plan in plan.cases:
                    todo = pending[case_plan.case.name]
                    if not todo:
                        continue
                    self.say(f"Case {case_plan.case.name}: proposing {len(todo)} expectations")
                    results = await run_case(CaseWork(todo, case_plan.video_path, judge=extract_judge),
                                             evaluator, concurrency=request.concurrency,
                                             keep_going=request.keep_going, sink=sink)
                    for r in results:
                        if r.status == ERROR:
                            errors.append(r)
                        else:
                            proposals[case_plan.case.name][r.sample_index] = r.observed_value
                await checkpoint.flush()
            finally:
                await checkpoint.flush()
                try:
                    await evaluator.close()
                except Exception as exc:
                    raise EvalError(f"adapter close failed: {exc}") from exc

        await interruptible(work())
        return errors

    def _write(self, plan: Plan, proposals: dict[str, dict[int, Any]], request: SeedRequest) -> None:
        from ..cases.write import read_case_text, replace_text
        from ..yamltext.edit import rewrite

        for case_plan in plan.cases:
            mine = proposals[case_plan.case.name]
            if not mine:
                continue
            case = case_plan.case
            edits = plan_edits(case, case_plan.samples, mine)
            original = read_case_text(case.path)
            data = json.loads(json.dumps(case.document.value))
            for edit in sorted(edits.edits, key=lambda e: (e.target_id, -e.block_index)):
                blocks = data["targets"][edit.target_id]["samples"]
                blocks[edit.block_index:edit.block_index + 1] = edit.blocks
            result = rewrite(original.text, data)
            _check_candidate(result.text, case.path)
            replace_text(case.path, result.text, expected_hash=original.hash)
            self._report(edits, result.fallback, result.reason)

    def _report(self, edits: CaseEdits, fallback: bool, reason: str | None) -> None:
        split = [e for e in edits.edits if e.split]
        text = f"Seeded {edits.case.name}: {edits.samples} samples filled in {len(edits.edits)} blocks"
        if split:
            text += f"; {len(split)} blocks split into {sum(len(e.blocks) for e in split)} by value"
        self.say(f"{text} ({edits.case.path})")
        if fallback:
            self.say(f"  note: the file was re-rendered in full ({reason}); YAML comments were not kept")


def format_time_float(value: float) -> str:
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _check_candidate(text: str, path: Path) -> None:
    """The new text must be a valid case file; never write one that is not."""
    from ..yamltext.source import load_yaml_text

    doc, problems = load_yaml_text(text, str(path))
    if not problems:
        _case, problems = parse_case(doc, path, allow_empty=True)
    if problems:
        raise ValidationError(problems, hint="seed produced an invalid case file and did not write it; "
                              "please report this as a bug")


def execute_seed(request: SeedRequest | None, out: TextIO, err: TextIO, *, resume: str | None = None) -> int:
    seeder = _Seeder(out, err)
    try:
        return seeder.run(request, resume)
    except SampleFailure as exc:
        print(f"Seed aborted: {exc}", file=err)
    except EvalError as exc:
        if isinstance(exc, UsageError):
            seeder.finish_checkpoint(complete=False)
            raise
        print(f"Seed aborted: {exc}", file=err)
    except KeyboardInterrupt:
        print("Seed interrupted.", file=err)
    hint = seeder.resume_hint()
    if hint:
        print(hint, file=err)
    seeder.finish_checkpoint(complete=False)
    return ExitCode.ERROR


__all__ = ["SeedRequest", "execute_seed"]
