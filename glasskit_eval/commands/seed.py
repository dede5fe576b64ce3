"""The ``seed`` command: checkpointed adapter calls, then one minimal-diff write per case.

It drives the same checkpoint lifecycle as ``run`` (resume, unchanged inputs, early stops,
SIGINT/SIGTERM); case files are written only when every selected expectation was proposed.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ..adapters.choose import adapter_spec, python_target
from ..arms.plan import ArmPlan
from ..cases.evaldir import load_adapter_config
from ..cases.model import TargetSpec
from ..cases.write import merge_into_current
from ..checkpoints.fingerprints import VideoDigests
from ..checkpoints.lifecycle import CheckpointedCommand
from ..errors import EvalError
from ..evaluation.case import CaseWork, run_case
from ..evaluation.lanes import Door, Needs, open_lanes
from ..evaluation.proposals import FIELD_ERROR, CaseEdits, extract_judge, needs_seed, plan_edits
from ..plan.pinning import repin_if_pinned
from ..plan.planning import CasePlan, Plan, build_plan
from ..plan.schedule import Filters, ScheduledSample
from ..plan.videos import video_resolver
from ..reports.tables import compact, time_label
from ..results import SampleResult, Status
from ..support import threads
from ..support.interrupts import interruptible
from .requests import SEED_KIND, SeedRequest, absolute
from .seedstreams import EventProposal, apply_events, events_to_seed, seed_streams, stream_targets


class _Seeder:
    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.life = CheckpointedCommand(SEED_KIND, "Seed")
        self.events: list[EventProposal] = []
        self.event_problems: list[str] = []

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self, given: SeedRequest | Path) -> bool:
        life = self.life
        digests = VideoDigests()  # hashed on a thread while planning reads frame tables
        request = life.resume(given, SeedRequest.from_json, digests) if isinstance(given, Path) else given
        # As the user gave it, for the commands we print (the checkpoint records it absolute).
        shown_dir = request.eval_dir
        life.verbose = request.verbose
        filters = Filters(case=request.case, targets=request.targets)
        plan = build_plan(request.eval_dir, filters, allow_empty=True, allow_drafts=True,
                          resolve_video=video_resolver(lambda message: print(message, file=self.err)),
                          on_video=digests.start)
        proposals: dict[str, dict[int, Any]] = {}
        pending: dict[str, list[ScheduledSample]] = {}
        for case_plan in plan.cases:
            mine: dict[int, Any] = {}
            todo = []
            for s in case_plan.samples:
                if not needs_seed(s, request.replace):
                    continue
                previous = life.previous.get((1, s.case.name, s.target.id, s.sample_index, None))
                if previous is not None and previous.status is not Status.ERROR:
                    mine[s.sample_index] = previous.observed_value
                else:
                    todo.append(s)
            proposals[case_plan.case.name] = mine
            pending[case_plan.case.name] = todo
        if request.calls.timeout_s is None and plan.eval_dir.config.run_timeout_s is not None:
            # As `run`: recorded resolved, so a resume keeps the timeout even if config.yaml changes.
            request = request.replaced(timeout_s=plan.eval_dir.config.run_timeout_s)
        streams = stream_targets(plan, request.replace)
        events = sum(len(events_to_seed(t, request.replace)) for _c, targets in streams for t in targets)
        total = sum(len(v) for v in pending.values()) + sum(len(v) for v in proposals.values()) + events
        if total == 0:
            self.say(f"Nothing to seed in {plan.eval_dir.root}: every selected expectation is present "
                     "(use --replace to propose new values for them).")
            return True
        if life.checkpoint is not None or any(pending.values()) or streams:
            if life.checkpoint is None:
                # Stored with absolute paths, so `seed --resume` works from any directory.
                request = request.replaced(eval_dir=str(plan.eval_dir.root),
                                  checkpoint_dir=absolute(request.checkpoint_dir),
                                  adapter=(python_target(request.adapter, plan.eval_dir.root)
                                           if request.adapter_command is None else None),
                                  adapter_config_path=(str(Path(request.adapter_config_path).expanduser().resolve())
                                                       if request.adapter_config_path else None))
            life.start(request.to_json(), plan, request.case, digests, total=total,
                       root=request.checkpoint_root(), err=self.err)
        errors = asyncio.run(self._evaluate(plan, request, pending, proposals, streams))
        if self.event_problems and not errors:
            for line in self.event_problems:
                self.say(f"  ERROR {line}")
            self.say(f"Seed incomplete: {len(self.event_problems)} event expectations could not be proposed; "
                     "case files were left unchanged.")
            life.finish(complete=False)
            return False
        if errors:
            for r in errors:
                self.say(f"  ERROR {r.case}/{r.target} @{time_label(r.timestamp_s)}s {r.reason}")
            missing = [r for r in errors if r.reason.startswith(FIELD_ERROR)]
            if missing and not request.keep_going:
                # A missing field is the adapter and the case disagreeing, not a flaky call that
                # --keep-going tolerates: an error (exit 2), as upstream.
                first = missing[0]
                raise EvalError(f"{len(missing)} observations lack the configured field (first: "
                                f"{first.case}/{first.target} @{time_label(first.timestamp_s)}s "
                                f"{first.reason.removeprefix(FIELD_ERROR)}); case files were left unchanged")
            if missing:
                # With --keep-going the scope was attempted: an incomplete seed (exit 1), as upstream.
                self.say(f"  {len(missing)} observations lack the configured field")
            self.say(f"Seed incomplete: {len(errors)} expectations could not be proposed; case files "
                     "were left unchanged.")
            if life.has_completed_work:
                self.say("\n".join(life.resume_lines()))
            life.finish(complete=False)
            return False
        written = self._write(plan, proposals)
        life.finish(complete=True)
        self._next_step(shown_dir, plan, written)
        return True

    def _next_step(self, eval_dir: str, plan: Plan, written: list[str]) -> None:
        """What a labeller does after seeding: look at the proposals before trusting them."""
        if not written:
            return
        where = "" if eval_dir == "eval" else f" --eval-dir {shlex.quote(eval_dir)}"
        case = f" --case {shlex.quote(written[0])}" if len(plan.cases) > 1 else ""
        self.say(f"Next: check the proposed labels frame by frame with `python -m glasskit_eval review{where}{case}`, "
                 "then run the eval.")

    async def _evaluate(self, plan: Plan, request: SeedRequest, pending: dict[str, list[ScheduledSample]],
                        proposals: dict[str, dict[int, Any]],
                        streams: Sequence[tuple[CasePlan, tuple[TargetSpec, ...]]] = ()) -> list[SampleResult]:
        if not any(pending.values()) and not streams:
            return []
        spec = adapter_spec(request.adapter, request.adapter_command, plan.eval_dir.root, self.err)
        # Seed's one arm: the adapter and its config, through the door `run` opens its lanes by.
        arms = ArmPlan.single(spec, load_adapter_config(plan.eval_dir.root, request.adapter_config_path))
        options = request.trial_options()
        door = Door.of(plan.eval_dir.root, options.call_policy, arms, verbose=request.verbose)
        needs = [Needs([s for todo in pending.values() for s in todo],
                       [(c.case.name, t.id) for c, targets in streams for t in targets])]
        life = self.life
        checkpoint = life.checkpoint
        assert checkpoint is not None
        errors: list[SampleResult] = []

        def sink(result: SampleResult) -> None:
            life.record(1, result)
            if request.verbose and result.status is not Status.ERROR:
                self.say(f"  {result.case}/{result.target} @{time_label(result.timestamp_s)}s "
                         f"-> {compact(result.observed_value)}")

        async def work() -> None:
            threads.install()
            try:
                async with open_lanes(door, arms, needs, 1) as (lane,):
                    assert lane is not None
                    for case_plan in plan.cases:
                        todo = pending[case_plan.case.name]
                        if not todo:
                            continue
                        self.say(f"Case {case_plan.case.name}: proposing {len(todo)} expectations")
                        results = await run_case(CaseWork(todo, case_plan.video_path, judge=extract_judge),
                                                 lane.caller, concurrency=options.concurrency,
                                                 keep_going=options.keep_going, sink=sink)
                        for r in results:
                            if r.status is Status.ERROR:
                                errors.append(r)
                            else:
                                proposals[case_plan.case.name][r.sample_index] = r.observed_value
                    if streams and not errors:
                        assert lane.stream_caller is not None
                        count = sum(len(events_to_seed(t, request.replace)) for _c, ts in streams for t in ts)
                        self.say(f"Streams: proposing {count} event expectations")
                        self.events, self.event_problems = await seed_streams(
                            lane.stream_caller, streams, request.replace, options.keep_going)
            finally:
                await checkpoint.flush()

        await interruptible(work())
        return errors

    def _write(self, plan: Plan, proposals: dict[str, dict[int, Any]]) -> list[str]:
        """Write each case's proposals; the names of the cases whose file changed."""
        written = []
        for case_plan in plan.cases:
            events = [e for e in self.events if e.case == case_plan.case.name]
            if events:
                case = case_plan.case
                done = merge_into_current(case.path, case.document.value, {e.target for e in events},
                                          functools.partial(apply_events, events))
                if done.changed:
                    written.append(case.name)
                    self.say(f"Seeded {case.name}: {len(events)} events filled ({case.path})")
            mine = proposals[case_plan.case.name]
            if not mine:
                continue
            case = case_plan.case
            edits = plan_edits(case, case_plan.samples, mine)

            # The file may have been edited while the adapter ran (an editor, review, another seed):
            # the edits land on the file as it is now, or are refused if they touch these targets.
            result = merge_into_current(case.path, case.document.value, {e.target_id for e in edits.edits},
                                        functools.partial(_apply, edits))
            if not result.changed:
                self.say(f"Nothing changed in {case.name}: the file already holds the {edits.samples} proposed "
                         f"values ({case.path})")
                continue
            written.append(case.name)
            self._report(edits, result.fallback, result.reason)
            # The labels were just made on these frames: a frame lock must say so.
            seeded = [s for s in case_plan.samples if s.sample_index in mine]
            pinned = repin_if_pinned(case_plan, seeded)
            if pinned is not None:
                self.say(f"  pinned the {len(seeded)} seeded frames in {pinned}")
        return written

    def _report(self, edits: CaseEdits, fallback: bool, reason: str | None) -> None:
        split = [e for e in edits.edits if e.split]
        text = f"Seeded {edits.case.name}: {edits.samples} samples filled in {len(edits.edits)} blocks"
        if split:
            text += f"; {len(split)} blocks split into {sum(len(e.blocks) for e in split)} by value"
        self.say(f"{text} ({edits.case.path})")
        if fallback:
            self.say(f"  note: the file was re-rendered in full ({reason}); YAML comments were not kept")


def _apply(edits: CaseEdits, data: Any) -> Any:
    """Replace each edited block by its new blocks (from the last, so indexes stay valid)."""
    for edit in sorted(edits.edits, key=lambda e: (e.target_id, -e.block_index)):
        blocks = data["targets"][edit.target_id]["samples"]
        blocks[edit.block_index:edit.block_index + 1] = edit.blocks
    return data


def execute_seed(request: SeedRequest | Path, out: TextIO, err: TextIO) -> bool:
    """Seed, or resume the seed checkpoint ``request`` names; True when every selected expectation
    was proposed and written.

    Errors are raised: before the checkpoint exists as they are, after it as
    :class:`~glasskit_eval.errors.CommandStopped` carrying the resume command.
    """
    seeder = _Seeder(out, err)
    with seeder.life.guard():
        return seeder.run(request)
