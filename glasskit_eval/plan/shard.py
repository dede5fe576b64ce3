"""Splitting one run's selected samples into N shards for a CI matrix (pure).

The split depends only on the plan (case files, the selection and the videos' frame sizes) and
N, never on the machine, the clock or hash seeds, so every job of a matrix computes the same split.
With at least N cases, whole cases are dealt out, largest expected work first, to the shard with the
least work so far (work = evaluated samples x frame cost, :func:`frame_cost`); a video is then
decoded by one job only. With fewer cases than shards, the cases' samples,
each case in time order, are cut into N contiguous runs of about equal work, so each job decodes one
stretch of a video. A stream target is never split: each (case, target) stream is one unit of work
(its fed frames x frame cost), placed before its case's samples, and goes whole to one shard.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from ..cases.model import TargetSpec
from ..errors import UsageError
from .planning import CasePlan, Plan
from .schedule import ScheduledSample


@dataclass(frozen=True, slots=True)
class Shard:
    #: 1-based.
    index: int
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


#: Most shards a run may be split into: far beyond any CI matrix or cluster array, and small
#: enough that a shard count is never a reason to allocate or loop.
MAX_SHARDS = 10_000


def job_number(text: str) -> int | None:
    """``text`` as a nonnegative integer if it is ASCII digits only (at most 9 of them), else None.

    str.isdigit() alone accepts "²" and other scripts' digits, which int() then refuses or reads.
    """
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > 9:
        return None
    return int(text)


def parse_shard(text: str, what: str = "--shard") -> Shard:
    index_text, sep, total_text = text.strip().partition("/")
    index, total = job_number(index_text), job_number(total_text)
    if not sep or index is None or total is None or not 1 <= index <= total:
        raise UsageError(f"{what} must be I/N with 1 <= I <= N (for example 2/4) or `auto`, got {text!r}")
    if total > MAX_SHARDS:
        raise UsageError(f"{what}: at most {MAX_SHARDS} shards, got {text!r}")
    return Shard(index, total)


#: CI variables ``--shard auto`` reads, in order: (index variable, total variable, index base).
CI_VARIABLES = (
    ("CI_NODE_INDEX", "CI_NODE_TOTAL", 1),  # GitLab `parallel:`
    ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0),
    ("CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0),
)


#: Cluster array jobs whose engine exports the index but not the count (0-based index variables);
#: the count then comes from GLASSKIT_SHARD_TOTAL.
INDEX_ONLY_VARIABLES = (
    "JOB_COMPLETION_INDEX",  # Kubernetes Indexed Job
    "AWS_BATCH_JOB_ARRAY_INDEX",  # AWS Batch array job
)
TOTAL_VARIABLE = "GLASSKIT_SHARD_TOTAL"


def shard_from_env(env: Mapping[str, str]) -> Shard:
    """``--shard auto``: GLASSKIT_SHARD (``I/N``), else the first CI's parallel-job variables, else a
    cluster's array-job index (Slurm, Kubernetes Indexed Jobs, AWS Batch)."""
    own = env.get("GLASSKIT_SHARD")
    if own:
        return parse_shard(own, "GLASSKIT_SHARD")
    for index_name, total_name, base in CI_VARIABLES:
        index, total = env.get(index_name), env.get(total_name)
        if index is None or total is None:
            continue
        first, count = job_number(index.strip()), job_number(total.strip())
        if first is None or count is None:
            raise UsageError(f"--shard auto: {index_name}={index!r} and {total_name}={total!r} are not "
                             "job numbers")
        return parse_shard(f"{first + 1 - base}/{count}", f"--shard auto ({index_name}, {total_name})")
    if "SLURM_ARRAY_TASK_ID" in env:
        return _slurm_shard(env)
    for index_name in INDEX_ONLY_VARIABLES:
        if index_name in env:
            position = _variable(env, index_name)
            count = _variable(env, TOTAL_VARIABLE, f"the shard count; {index_name} gives only the index")
            return parse_shard(f"{position + 1}/{count}", f"--shard auto ({index_name}, {TOTAL_VARIABLE})")
    raise UsageError("--shard auto found no shard in the environment; set GLASSKIT_SHARD=I/N (GitHub "
                     "Actions: from ${{ strategy.job-index }} and ${{ strategy.job-total }}) or run under "
                     "GitLab parallel, Buildkite parallelism, CircleCI parallelism, a Slurm job array, a "
                     f"Kubernetes Indexed Job or an AWS Batch array job (these two with {TOTAL_VARIABLE}=N)")


def _variable(env: Mapping[str, str], name: str, missing: str | None = None) -> int:
    value = env.get(name)
    if value is None:
        raise UsageError(f"--shard auto: set {name}" + (f" to {missing}" if missing else ""))
    number = job_number(value.strip())
    if number is None:
        raise UsageError(f"--shard auto: {name}={value!r} is not a job number")
    return number


def _slurm_shard(env: Mapping[str, str]) -> Shard:
    # Slurm numbers array tasks as the user wrote --array (e.g. 10-19 or 0-18:2); the shard is the
    # task's position in that range. A list such as 1,5,7 has no such position.
    task, low = _variable(env, "SLURM_ARRAY_TASK_ID"), _variable(env, "SLURM_ARRAY_TASK_MIN")
    step = _variable(env, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in env else 1
    if "SLURM_ARRAY_TASK_COUNT" in env:
        total_name, total = "SLURM_ARRAY_TASK_COUNT", _variable(env, "SLURM_ARRAY_TASK_COUNT")
    else:
        total_name, total = TOTAL_VARIABLE, _variable(env, TOTAL_VARIABLE, "the array's task count")
    offset = task - low
    if step < 1 or offset < 0 or offset % step or offset // step >= total:
        raise UsageError(f"--shard auto: Slurm task {task} is not one of {total} tasks from {low} in steps of "
                         f"{step}; submit the array as --array=FIRST-LAST[:STEP]")
    return parse_shard(f"{offset // step + 1}/{total}", f"--shard auto (SLURM_ARRAY_TASK_ID, {total_name})")


def frame_cost(case: CasePlan) -> int:
    """Relative cost of reaching and decoding one frame of the case's video (an integer, so exact).

    A frame costs its pixels, times the frames decoded to reach it: on average half a keyframe
    interval (from the frame table) plus itself.
    """
    video = case.video
    if video is None:
        return 2
    per_keyframe = video.frame_count // max(1, video.keyframe_count)
    return video.width * video.height * (2 + per_keyframe)


def _sample_cost(case: CasePlan, sample: ScheduledSample) -> int:
    return 0 if sample.ignored else frame_cost(case)


def stream_cost(case: CasePlan, target: TargetSpec) -> int:
    """A whole stream: every fed frame decoded in order (no seeking), each at a frame's pixel cost."""
    video, stream = case.video, target.stream
    if video is None or stream is None:
        return 2
    frames = video.frame_count
    if stream.every_s is not None:
        frames = min(frames, int(video.end_time // stream.every_s) + 1)
    return max(1, frames) * video.width * video.height


def case_cost(case: CasePlan) -> int:
    return sum(_sample_cost(case, s) for s in case.samples) + sum(stream_cost(case, t) for t in case.streams)


#: One unit a shard runs: a sample, or a whole stream target of the case.
Work = ScheduledSample | TargetSpec


def assign(plan: Plan, total: int) -> dict[int, dict[int, list[Work]]]:
    """The shards (0-based) that have work, each with the samples and streams of each case (by index
    into ``plan.cases``) it runs.

    Memory and time grow with the plan, never with ``total``: shards without work are absent.
    """
    shards: dict[int, dict[int, list[Work]]] = {}
    cases = plan.cases
    if len(cases) >= total:
        # Least loaded shard first (load, cases held, index). Shards not yet used are all (0, 0, s),
        # so only used ones are kept in the heap and the next unused index stands for the rest.
        used: list[tuple[int, int, int]] = []
        unused = 0
        order = sorted(range(len(cases)), key=lambda i: (-case_cost(cases[i]), i))
        for i in order:
            if unused < total and (not used or (0, 0, unused) < used[0]):
                load, held, best = 0, 0, unused
                unused += 1
            else:
                load, held, best = heapq.heappop(used)
            shards.setdefault(best, {})[i] = [*cases[i].streams, *cases[i].samples]
            heapq.heappush(used, (load + case_cost(cases[i]), held + 1, best))
        return shards
    flat: list[tuple[int, Work, int]] = []
    for i, c in enumerate(cases):
        flat += [(i, t, stream_cost(c, t)) for t in c.streams]
        flat += [(i, s, _sample_cost(c, s)) for s in sorted(c.samples, key=lambda s: (s.time, s.sample_index))]
    weights = [cost for _i, _s, cost in flat]
    if not any(weights):
        weights = [1] * len(flat)
    whole = sum(weights)
    done = 0
    for (i, unit, _cost), weight in zip(flat, weights):
        # The shard holding the unit's midpoint of cumulative work: contiguous and in order.
        shard = min(total - 1, (2 * done + weight) * total // (2 * whole))
        shards.setdefault(shard, {}).setdefault(i, []).append(unit)
        done += weight
    return shards


def shard_plan(plan: Plan, shard: Shard) -> Plan:
    """The part of ``plan`` that ``shard`` runs; each case keeps its samples in schedule order."""
    mine = assign(plan, shard.total).get(shard.index - 1, {})
    cases = []
    for i, case in enumerate(plan.cases):
        if i in mine:
            chosen = {s.sample_index for s in mine[i] if isinstance(s, ScheduledSample)}
            streams = {t.id for t in mine[i] if isinstance(t, TargetSpec)}
            cases.append(CasePlan(case.case, tuple(s for s in case.samples if s.sample_index in chosen),
                                  case.video_path, case.video, tuple(t for t in case.streams if t.id in streams)))
    return Plan(plan.eval_dir, tuple(cases))
