"""Shard splits: deterministic, exactly once, balanced by work; `--shard auto` from CI variables."""

from __future__ import annotations

import itertools
import re
import tracemalloc
from pathlib import Path

import pytest
from evalkit import make_eval

from glasskit_eval.errors import UsageError
from glasskit_eval.plan.planning import Plan, build_plan
from glasskit_eval.plan.schedule import Filters
from glasskit_eval.plan.shard import (
    MAX_SHARDS,
    Shard,
    assign,
    frame_cost,
    parse_shard,
    shard_from_env,
    shard_plan,
)

pytestmark = pytest.mark.frames


def case(times: str, video: str = "cfr_h264.mp4") -> str:
    return f"video: {video}\ntargets:\n  a:\n    samples:\n    - at: [{times}]\n      expect: 1\n"


def plan_of(tmp_path: Path, cases: dict[str, str]) -> Plan:
    eval_dir = make_eval(tmp_path, cases, videos=("cfr_h264.mp4", "vp9.webm"))
    return build_plan(eval_dir, Filters(), allow_empty=False)


def keys(plan: Plan) -> list[tuple[str, int]]:
    return [(c.case.name, s.sample_index) for c in plan.cases for s in c.samples]


def test_whole_cases_by_work_when_there_are_enough_cases(tmp_path: Path) -> None:
    # Sample counts 6, 1, 1, 1, 3: dealt biggest first to the least loaded shard.
    plan = plan_of(tmp_path, {"a": case("0, 0.2, 0.4, 0.6, 0.8, 1"), "b": case("0"), "c": case("0.1"),
                              "d": case("0.2"), "e": case("0, 0.5, 1")})
    parts = [shard_plan(plan, Shard(i, 3)) for i in (1, 2, 3)]
    assert [[c.case.name for c in p.cases] for p in parts] == [["a"], ["e"], ["b", "c", "d"]]
    assert sorted(k for p in parts for k in keys(p)) == sorted(keys(plan))
    # A pure function of the plan: the same split every time.
    assert [keys(shard_plan(plan, Shard(i, 3))) for i in (1, 2, 3)] == [keys(p) for p in parts]


def test_frame_cost_weighs_the_work(tmp_path: Path) -> None:
    # cfr_h264.mp4 has one keyframe in 20 frames, bframes_h264.mp4 one in 10: reaching a frame of the
    # first costs more, so its 2 samples outweigh 3 of the second (by count it would be the reverse).
    eval_dir = make_eval(tmp_path, {"big": case("0, 0.1"), "small": case("0, 0.1, 0.2", "bframes_h264.mp4"),
                                    "tiny": case("0", "bframes_h264.mp4")},
                         videos=("cfr_h264.mp4", "bframes_h264.mp4"))
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    costs = {c.case.name: frame_cost(c) for c in plan.cases}
    assert costs["big"] * 2 > costs["small"] * 3
    shards = assign(plan, 2)
    assert [sorted(plan.cases[i].case.name for i in shards[s]) for s in sorted(shards)] == [["big"],
                                                                                           ["small", "tiny"]]


def test_fewer_cases_than_shards_cuts_contiguous_time_slices(tmp_path: Path) -> None:
    text = ("video: cfr_h264.mp4\ntargets:\n  a:\n    samples:\n    - range: [0, 1.2]\n      every_s: 0.1\n"
            "      expect: 1\n  b:\n    samples:\n    - at: [0.05, 1.15]\n      expect: 1\n")
    plan = plan_of(tmp_path, {"only": text})
    parts = [shard_plan(plan, Shard(i, 4)) for i in (1, 2, 3, 4)]
    times = [[float(s.time) for c in p.cases for s in c.samples] for p in parts]
    assert [len(t) for t in times] == [3, 4, 3, 4]
    # Each shard is one stretch of the video; together they cover it once, in time order.
    spans = [(min(t), max(t)) for t in times]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
    assert sorted(k for p in parts for k in keys(p)) == sorted(keys(plan))
    # Within a shard, results keep the schedule's order (targets, then blocks, then times).
    assert [s.target.id for s in parts[0].cases[0].samples] == ["a", "a", "b"]


def test_more_shards_than_samples_leaves_some_empty(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, {"one": case("0, 1")})
    sizes = [len(keys(shard_plan(plan, Shard(i, 3)))) for i in (1, 2, 3)]
    assert sorted(sizes) == [0, 1, 1]


@pytest.mark.parametrize(("env", "expected"), [
    ({"GLASSKIT_SHARD": "2/5", "CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "3"}, Shard(2, 5)),
    ({"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "3"}, Shard(3, 3)),  # GitLab counts from 1
    ({"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "4"}, Shard(1, 4)),  # from 0
    ({"CIRCLE_NODE_INDEX": "1", "CIRCLE_NODE_TOTAL": "2"}, Shard(2, 2)),  # from 0
    # Clusters: a Kubernetes Indexed Job and AWS Batch export only the 0-based index.
    ({"JOB_COMPLETION_INDEX": "0", "GLASSKIT_SHARD_TOTAL": "4"}, Shard(1, 4)),
    ({"JOB_COMPLETION_INDEX": "3", "GLASSKIT_SHARD_TOTAL": "4"}, Shard(4, 4)),
    ({"AWS_BATCH_JOB_ARRAY_INDEX": "2", "GLASSKIT_SHARD_TOTAL": "3"}, Shard(3, 3)),
    # Slurm numbers tasks as --array was written: 1-4, 10-13, 0-6:2.
    ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"}, Shard(1, 4)),
    ({"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_COUNT": "4"}, Shard(3, 4)),
    ({"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2",
      "SLURM_ARRAY_TASK_COUNT": "4"}, Shard(4, 4)),
    ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "5", "GLASSKIT_SHARD_TOTAL": "2"}, Shard(1, 2)),
    # GLASSKIT_SHARD wins over everything; a CI's own variables over a cluster's.
    ({"GLASSKIT_SHARD": "1/2", "JOB_COMPLETION_INDEX": "1", "GLASSKIT_SHARD_TOTAL": "2"}, Shard(1, 2)),
    ({"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "2", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0",
      "SLURM_ARRAY_TASK_COUNT": "2"}, Shard(2, 2)),
])
def test_shard_auto_reads_each_ci(env: dict[str, str], expected: Shard) -> None:
    assert shard_from_env(env) == expected


def test_bad_shards_are_usage_errors() -> None:
    for text in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(UsageError, match="must be I/N"):
            parse_shard(text)
    with pytest.raises(UsageError, match="found no shard in the environment; set GLASSKIT_SHARD"):
        shard_from_env({})
    with pytest.raises(UsageError, match=r"CIRCLE_NODE_INDEX='x'"):
        shard_from_env({"CIRCLE_NODE_INDEX": "x", "CIRCLE_NODE_TOTAL": "2"})
    with pytest.raises(UsageError, match=r"GLASSKIT_SHARD must be I/N"):
        shard_from_env({"GLASSKIT_SHARD": "3/2"})


@pytest.mark.parametrize("text", ["\u00b2/3", "1/\u00b3", "\u0661/\u0662", "\uff11/\uff12", "1/1e3", "+1/2", "1 /2",
                                  "1/" + "9" * 5000])
def test_shard_numbers_are_ascii_digits(text: str) -> None:
    # "²".isdigit() is true and int("²") raises; Arabic-Indic and full-width digits int() reads.
    with pytest.raises(UsageError, match="must be I/N"):
        parse_shard(text)
    with pytest.raises(UsageError, match="GLASSKIT_SHARD must be I/N"):
        shard_from_env({"GLASSKIT_SHARD": text})


def test_ci_job_numbers_are_ascii_digits() -> None:
    for index, total in (("\u00b2", "3"), ("1", "\u0663"), ("9" * 5000, "2")):
        with pytest.raises(UsageError, match="are not job numbers"):
            shard_from_env({"CIRCLE_NODE_INDEX": index, "CIRCLE_NODE_TOTAL": total})


def test_at_most_ten_thousand_shards() -> None:
    assert MAX_SHARDS == 10_000
    assert parse_shard("10000/10000") == Shard(10_000, 10_000)
    for text in ("1/10001", "1/99999999999"):
        with pytest.raises(UsageError, match=r"at most 10000 shards|must be I/N"):
            parse_shard(text)
    with pytest.raises(UsageError, match=r"at most 10000 shards"):
        shard_from_env({"BUILDKITE_PARALLEL_JOB": "0", "BUILDKITE_PARALLEL_JOB_COUNT": "10001"})


def _peak_bytes(plan: Plan, shard: Shard) -> int:
    tracemalloc.start()
    try:
        shard_plan(plan, shard)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_nothing_is_allocated_per_shard(tmp_path: Path) -> None:
    # Both ways of splitting: fewer cases than shards (time slices), and whole cases.
    few = plan_of(tmp_path / "few", {"one": case("0, 0.5, 1")})
    many = plan_of(tmp_path / "many", {f"c{i}": case("0") for i in range(4)})
    for plan, small in ((few, Shard(1, 2)), (many, Shard(1, 4))):
        base = _peak_bytes(plan, small)
        for shard in (Shard(1, MAX_SHARDS), Shard(MAX_SHARDS, MAX_SHARDS)):
            # One empty dict per shard alone would be 640 kB.
            assert _peak_bytes(plan, shard) - base < 50_000
    assert sorted(k for i in range(1, 5) for k in keys(shard_plan(many, Shard(i, 4)))) == sorted(keys(many))


@pytest.mark.parametrize(("env", "message"), [
    ({"JOB_COMPLETION_INDEX": "0"}, "set GLASSKIT_SHARD_TOTAL to the shard count; JOB_COMPLETION_INDEX gives only "
                                    "the index"),
    ({"AWS_BATCH_JOB_ARRAY_INDEX": "x", "GLASSKIT_SHARD_TOTAL": "2"}, "AWS_BATCH_JOB_ARRAY_INDEX='x' is not a job "
                                                                      "number"),
    ({"JOB_COMPLETION_INDEX": "4", "GLASSKIT_SHARD_TOTAL": "4"}, "must be I/N with 1 <= I <= N"),
    ({"JOB_COMPLETION_INDEX": "0", "GLASSKIT_SHARD_TOTAL": "10001"}, "at most 10000 shards"),
    ({"SLURM_ARRAY_TASK_ID": "3"}, "set SLURM_ARRAY_TASK_MIN"),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1"}, "set GLASSKIT_SHARD_TOTAL to the array's task count"),
    ({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "3"},
     "Slurm task 7 is not one of 3 tasks from 1 in steps of 1; submit the array as --array=FIRST-LAST"),
    ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2",
      "SLURM_ARRAY_TASK_COUNT": "3"}, "Slurm task 3 is not one of 3 tasks from 0 in steps of 2"),
])
def test_cluster_variables_that_do_not_make_a_shard(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        shard_from_env(env)


def test_no_shard_in_the_environment_names_the_clusters() -> None:
    with pytest.raises(UsageError, match="a Slurm job array, a Kubernetes Indexed Job or an AWS Batch array job"):
        shard_from_env({"GLASSKIT_SHARD_TOTAL": "3"})
