"""Case files: every rule of the spec's "Case file reference" (glasskit_eval.cases.parse)."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import load_case

from glasskit_eval.cases.model import (
    MAX_SAMPLES_PER_CASE,
    VIDEO_SUFFIXES,
    Case,
    CloudVideo,
    LocalVideo,
    SampleBlock,
    Thresholds,
    block_count,
    block_times,
    range_count,
)
from glasskit_eval.cases.parse import parse_case
from glasskit_eval.compare.values import CompareConfig
from glasskit_eval.errors import Problem
from glasskit_eval.yamltext.source import YamlDocument

Found = list[tuple[str, "int | None", str]]


def write(tmp_path: Path, text: str, name: str = "c") -> Path:
    cases = tmp_path / "eval" / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    path = cases / f"{name}.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def parse(tmp_path: Path, text: str, *, allow_empty: bool = False) -> tuple[Case | None, list[Problem]]:
    return load_case(write(tmp_path, text), allow_empty=allow_empty)


def ok(tmp_path: Path, text: str, *, allow_empty: bool = False) -> Case:
    case, problems = parse(tmp_path, text, allow_empty=allow_empty)
    assert problems == [], "\n".join(str(p) for p in problems)
    assert case is not None
    return case


def found(tmp_path: Path, text: str, *, allow_empty: bool = False) -> Found:
    """(YAML path, line, message) of every problem; the case must be refused."""
    case, problems = parse(tmp_path, text, allow_empty=allow_empty)
    assert problems and case is None
    path = tmp_path / "eval" / "cases" / "c.yaml"
    assert all(p.file == str(path) for p in problems)
    return [(p.path, p.line, p.message) for p in problems]


def one(tmp_path: Path, text: str, **kwargs: bool) -> tuple[str, int | None, str]:
    problems = found(tmp_path, text, **kwargs)
    assert len(problems) == 1, problems
    return problems[0]


def block(case: Case, target: str = "t", index: int = 0) -> SampleBlock:
    spec = case.target(target)
    assert spec is not None
    return spec.blocks[index]


def times(case: Case, target: str = "t", index: int = 0) -> list[Fraction]:
    return list(block_times(block(case, target, index)))


def floats(values: list[Fraction]) -> list[float]:
    return [float(v) for v in values]


HEAD = """
video: v.mp4
targets:
  t:
    samples:
"""  # sample blocks written after HEAD start on line 5


# --- the representative case of the spec ------------------------------------------------

SPEC_CASE = """
video: task-01.mp4
description: Step 1 should be detected after the bracket is seated.
sampling:
  every_s: 0.5
targets:
  step_1:
    label: Step 1
    config:
      prompt_id: workflow.step_1
      reference_image: assets/step_1.png
    samples:
    - range: [0.0, 6.8]
      expect: false
      comment: The bracket is not seated yet.
    - range: [7.4, 11.8]
      every_s: 0.25
      field: result.matches
      expect: true
    - at: 11.9
      expect: true
      ignore: Difficult frame with known flaky observations.
  step_2:
    label: Step 2
    samples:
    - at: [4.0, 6.0] # Two discrete samples, not a range.
      expect: false
thresholds:
  min_pass_rate: 0.9
  max_failures: 2
  per_target:
    step_1:
      min_pass_rate: 0.95
"""


def test_the_spec_example_case_parses_into_the_model(tmp_path: Path) -> None:
    case = ok(tmp_path, SPEC_CASE)
    path = tmp_path / "eval" / "cases" / "c.yaml"
    assert case.name == "c" and case.path == path
    assert case.video == LocalVideo((path.parent / "task-01.mp4").resolve())
    assert case.description == "Step 1 should be detected after the bracket is seated."
    assert [t.id for t in case.targets] == ["step_1", "step_2"]
    assert [t.index for t in case.targets] == [0, 1]
    step_1, step_2 = case.targets
    assert step_1.label == "Step 1" and step_2.label == "Step 2"
    assert dict(step_1.config) == {"prompt_id": "workflow.step_1", "reference_image": "assets/step_1.png"}
    assert dict(step_2.config) == {}

    first, second, third = step_1.blocks
    assert first.range == (Fraction(0), Fraction(68, 10)) and first.every_s == Fraction(1, 2)
    assert first.expect is False and first.has_expect and first.comment == "The bracket is not seated yet."
    assert first.field is None and first.compare is None and first.ignore is None
    assert block_count(first) == 14
    assert second.every_s == Fraction(1, 4) and second.field == "result.matches"
    assert floats(list(block_times(second)))[:3] == [7.4, 7.65, 7.9]
    assert block_count(second) == 18  # 7.4 .. 11.65
    assert third.times == (Fraction(119, 10),) and third.range is None and third.every_s is None
    assert third.ignore == "Difficult frame with known flaky observations."
    assert step_2.blocks[0].times == (Fraction(4), Fraction(6))

    assert case.thresholds == Thresholds(min_pass_rate=0.9, max_failures=2, per_target={"step_1": 0.95})
    assert case.document.value["description"] == case.description


def test_the_spec_sample_defaults_example(tmp_path: Path) -> None:
    case = ok(tmp_path, """
        video: v.mp4
        sample_defaults:
          field: result
          compare:
            mode: json_subset
        targets:
          object_detection:
            samples:
            - range: [180.0, 182.0]
              expect:
                object: coffee_mug
                color: red
          confidence:
            sample_defaults:
              field: result.confidence
              compare:
                mode: numeric
                tolerance: 0.05
            samples:
            - at: 182.0
              expect: 0.9
        """)
    detection = block(case, "object_detection")
    assert detection.field == "result" and detection.compare == CompareConfig("json_subset", 0.0)
    assert detection.expect == {"object": "coffee_mug", "color": "red"}
    confidence = block(case, "confidence")
    assert confidence.field == "result.confidence" and confidence.compare == CompareConfig("numeric", 0.05)


def test_the_spec_comparison_example(tmp_path: Path) -> None:
    case = ok(tmp_path, """
        video: v.mp4
        targets:
          detector:
            samples:
            - at: 2.0
              field: result.matches
              expect: true
            - at: 3.0
              field: result.confidence
              expect: 0.8
              compare:
                mode: numeric
                tolerance: 0.05
            - at: 4.0
              field: detected_classes
              expect:
              - bracket
              - fastener
              compare:
                mode: set_contains_all
        """)
    blocks = case.targets[0].blocks
    assert [b.compare for b in blocks] == [None, CompareConfig("numeric", 0.05), CompareConfig("set_contains_all")]
    assert blocks[2].expect == ["bracket", "fastener"]


def test_minimal_case(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + "    - at: 0\n      expect: false\n")
    assert case.description is None and case.thresholds is None
    t = case.targets[0]
    assert t.label is None and dict(t.config) == {}
    assert block(case).times == (Fraction(0),)


# --- video -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["v.mp4", "v.mov", "v.m4v", "v.webm", "v.mkv", "V.MP4", "v.MoV", "clip.v2.WebM"])
def test_supported_video_suffixes_any_case(tmp_path: Path, name: str) -> None:
    case = ok(tmp_path, HEAD.replace("v.mp4", name) + "    - at: 1\n      expect: true\n")
    assert isinstance(case.video, LocalVideo) and case.video.path.name == name
    assert set(VIDEO_SUFFIXES) == {".mp4", ".mov", ".m4v", ".webm", ".mkv"}


@pytest.mark.parametrize(("name", "shown"), [("v.avi", "'.avi'"), ("v", "'(none)'"), ("v.mp4.txt", "'.txt'")])
def test_unsupported_video_suffix(tmp_path: Path, name: str, shown: str) -> None:
    path, line, message = one(tmp_path, HEAD.replace("v.mp4", name) + "    - at: 1\n      expect: true\n")
    assert (path, line) == ("video", 1)
    assert message == (f"unsupported video suffix {shown}; supported: .mp4, .mov, .m4v, .webm, .mkv")


def test_video_path_is_resolved_relative_to_the_case_file(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD.replace("v.mp4", "../../recordings/task-01.mp4") + "    - at: 1\n      expect: true\n")
    assert case.video == LocalVideo((tmp_path / "recordings" / "task-01.mp4").resolve())
    case = ok(tmp_path, HEAD.replace("v.mp4", "sub/dir/v.mp4") + "    - at: 1\n      expect: true\n")
    assert case.video == LocalVideo((tmp_path / "eval" / "cases" / "sub" / "dir" / "v.mp4").resolve())
    absolute = tmp_path / "elsewhere" / "v.mov"
    case = ok(tmp_path, HEAD.replace("v.mp4", str(absolute)) + "    - at: 1\n      expect: true\n")
    assert case.video == LocalVideo(absolute.resolve())
    assert case.video.describe() == str(absolute.resolve())


def test_video_is_not_checked_for_existence_while_parsing(tmp_path: Path) -> None:
    # Existence and duration are the planner's job; list-samples works without the file.
    case = ok(tmp_path, HEAD.replace("v.mp4", "missing.mp4") + "    - at: 1\n      expect: true\n")
    assert isinstance(case.video, LocalVideo) and not case.video.path.exists()


SHA = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"


def test_cloud_video_reference(tmp_path: Path) -> None:
    case = ok(tmp_path, f"""
        video:
          store: team-videos
          key: {SHA}.mp4
          sha256: {SHA}
        targets:
          step_1:
            samples:
            - at: 0
              expect: false
        """)
    assert case.video == CloudVideo("team-videos", f"{SHA}.mp4", SHA)
    assert case.video.describe() == f"team-videos:{SHA}.mp4"


def test_cloud_video_sha256_is_case_insensitive(tmp_path: Path) -> None:
    case = ok(tmp_path, f"""
        video: {{store: s, key: clip.MOV, sha256: {SHA.upper()}}}
        targets: {{t: {{samples: [{{at: 1, expect: true}}]}}}}
        """)
    assert isinstance(case.video, CloudVideo) and case.video.sha256 == SHA


def test_cloud_video_problems_are_all_reported(tmp_path: Path) -> None:
    problems = found(tmp_path, f"""
        video:
          store: ""
          sha256: {SHA}
          bucket: x
        targets: {{t: {{samples: [{{at: 1, expect: true}}]}}}}
        """)
    assert [(p, line) for p, line, _ in problems] == [("video.key", 1), ("video.store", 2), ("video.bucket", 4)]
    assert "needs `key`" in problems[0][2]
    assert problems[1][2] == "store must not be empty"
    assert "unknown key 'bucket'" in problems[2][2] and "allowed keys: key, sha256, store" in problems[2][2]


@pytest.mark.parametrize(("sha", "key"), [("abc", "a.mp4"), (SHA[:-1] + "g", "a.mp4"), (SHA + "0", "a.mp4")])
def test_cloud_video_sha256_must_be_a_digest(tmp_path: Path, sha: str, key: str) -> None:
    path, line, message = one(tmp_path, f"""
        video: {{store: s, key: {key}, sha256: {sha}}}
        targets: {{t: {{samples: [{{at: 1, expect: true}}]}}}}
        """)
    assert (path, line) == ("video.sha256", 1)
    assert message.startswith("sha256 must be a 64-character hexadecimal SHA-256 digest")


def test_cloud_video_key_needs_a_video_suffix(tmp_path: Path) -> None:
    path, _, message = one(tmp_path, f"""
        video: {{store: s, key: "{SHA}", sha256: {SHA}}}
        targets: {{t: {{samples: [{{at: 1, expect: true}}]}}}}
        """)
    assert path == "video.key" and message.startswith("unsupported video suffix in key")


@pytest.mark.parametrize(("value", "message"), [
    ('""', "video path must not be empty"),
    ("5", "video must be a path relative to the case file or a {store, key, sha256} cloud reference, got a number"),
    ("[a.mp4]", "video must be a path relative to the case file or a {store, key, sha256} cloud reference, got a list"),
])
def test_bad_video_values(tmp_path: Path, value: str, message: str) -> None:
    assert one(tmp_path, HEAD.replace("v.mp4", value) + "    - at: 1\n      expect: true\n") == ("video", 1, message)


def test_video_and_targets_are_required(tmp_path: Path) -> None:
    problems = found(tmp_path, "description: nothing else\n")
    assert [p for p, _, _ in problems] == ["video", "targets"]
    assert problems[0][2].startswith("a case needs `video:`")
    assert problems[1][2].startswith("a case needs `targets:`")
    assert one(tmp_path, "video: v.mp4\ntargets: {}\n") == (
        "targets", 2, "targets must contain at least one target")
    assert one(tmp_path, "video: v.mp4\ntargets: {}\n", allow_empty=True)[0] == "targets"
    assert one(tmp_path, "video: v.mp4\ntargets: [t]\n") == ("targets", 2, "targets must be a mapping, got a list")


def test_empty_and_non_mapping_files(tmp_path: Path) -> None:
    assert one(tmp_path, "") == ("", None, "case file is empty; it needs at least `video:` and `targets:`")
    assert one(tmp_path, "- video: v.mp4\n") == ("", 1, "a case file must be a mapping, got a list")


def test_yaml_problems_come_back_from_load_case(tmp_path: Path) -> None:
    path, line, message = one(tmp_path, HEAD + "    - at: 1\n      expect: true\n      expect: false\n")
    assert (path, line) == ("targets.t.samples[0].expect", 7) and "duplicate key" in message
    path, line, message = one(tmp_path, "video: v.mp4\ntargets: {t: [}\n")
    assert path == "" and line == 2 and message.startswith("invalid YAML: ")


def test_target_ids_must_be_strings(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.mp4
        targets:
          1:
            samples: [{at: 1, expect: true}]
          yes:
            samples: [{at: 1, expect: true}]
        """)
    assert [(p, line) for p, line, _ in problems] == [("targets.1", 3), ("targets.yes", 5)]
    assert all("keys must be strings; quote it" in m for _, _, m in problems)


# --- unknown keys, at every level ------------------------------------------------------

UNKNOWN_KEYS = """
video: v.mp4
bogus: 1
sampling:
  every_s: 0.5
  every: 1
sample_defaults:
  field: a
  fields: b
  compare: {mode: exact, tol: 1}
workflow:
  target: []
  targets:
  - id: t
    anything: goes
    nested: {deep: [1, 2]}
targets:
  t:
    colour: red
    sample_defaults:
      compare: {mode: numeric, tolerence: 0.1}
      feild: x
    samples:
    - at: 1
      expect: 1
      expected: 1
    - at: 2
      expect: 2
    - range: [3, 4]
      expect: 1
      compare: {mode: numeric, tolerance: 0.1, extra: true}
thresholds:
  min_pass_rate: 0.5
  max_failure: 1
  per_target:
    t: {min_pass_rate: 0.5, max_failures: 1}
"""


def test_unknown_keys_are_rejected_everywhere_with_path_and_line(tmp_path: Path) -> None:
    problems = found(tmp_path, UNKNOWN_KEYS)
    assert [(p, line) for p, line, _ in problems] == [
        ("bogus", 2),
        ("sampling.every", 5),
        ("sample_defaults.fields", 8),
        ("sample_defaults.compare.tol", 9),
        ("workflow.target", 11),
        ("targets.t.colour", 18),
        ("targets.t.sample_defaults.compare.tolerence", 20),
        ("targets.t.sample_defaults.feild", 21),
        ("targets.t.samples[0].expected", 25),
        ("targets.t.samples[2].compare.extra", 30),
        ("thresholds.max_failure", 33),
        ("thresholds.per_target.t.max_failures", 35),
    ]
    messages = {p: m for p, _, m in problems}
    assert messages["bogus"] == ("unknown key 'bogus'; allowed keys: description, sample_defaults, sampling, "
                                 "targets, thresholds, video, workflow")
    assert messages["targets.t.samples[0].expected"].startswith("unknown key 'expected' (did you mean 'expect'?)")
    assert messages["targets.t.sample_defaults.feild"].startswith("unknown key 'feild' (did you mean 'field'?)")
    assert "(did you mean 'tolerance'?)" in messages["targets.t.sample_defaults.compare.tolerence"]
    assert messages["targets.t.colour"].endswith("allowed keys: config, events, label, quiet, sample_defaults, samples, stream")
    assert messages["targets.t.samples[0].expected"].endswith(
        "allowed keys: at, clip, comment, compare, every_s, expect, field, ignore, range")


def test_workflow_target_entries_accept_extra_metadata_keys(tmp_path: Path) -> None:
    problems = found(tmp_path, UNKNOWN_KEYS)
    assert not any(p.startswith("workflow.targets") for p, _, _ in problems)


# --- targets: label, config, workflow.targets -------------------------------------------

def test_workflow_targets_merge_rules(tmp_path: Path) -> None:
    case = ok(tmp_path, """
        video: v.mp4
        workflow:
          targets:
          - id: step_1
            app_step_id: 123
            prompt_id: workflow.step_1
            shared: from_workflow
          - id: step_2
            label: WF label 2
            prompt_id: wf.2
          - id: step_3
            label: WF label 3
          - id: not_a_target
            other: 1
        targets:
          step_1:
            config:
              confidence_threshold: 0.85
              shared: from_target
            samples:
            - at: 8.0
              expect: true
          step_2:
            samples:
            - at: 1
              expect: true
          step_3:
            label: Own label
            samples:
            - at: 1
              expect: true
          untouched:
            samples:
            - at: 1
              expect: true
        """)
    step_1, step_2, step_3, untouched = case.targets
    # Workflow metadata other than id and label, then targets.<id>.config on top.
    assert dict(step_1.config) == {"app_step_id": 123, "prompt_id": "workflow.step_1",
                                   "shared": "from_target", "confidence_threshold": 0.85}
    assert step_1.label is None
    assert dict(step_2.config) == {"prompt_id": "wf.2"} and step_2.label == "WF label 2"
    assert dict(step_3.config) == {} and step_3.label == "Own label"
    assert dict(untouched.config) == {} and untouched.label is None


def test_workflow_entries_need_a_string_id(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.mp4
        workflow:
          targets:
          - id: t
            label: T label
            extra_key: 5
          - label: no id here
          - id: 5
          - id: ""
          - id: u
            label: 7
          - just a string
          - id: t
        targets:
          t:
            samples: [{at: 1, expect: true}]
        """)
    assert problems == [
        ("workflow.targets[1].id", 7, "each workflow target needs a string `id`"),
        ("workflow.targets[2].id", 8, "each workflow target needs a string `id`"),
        ("workflow.targets[3].id", 9, "each workflow target needs a string `id`"),
        ("workflow.targets[4].label", 11, "label must be a string, got a number"),
        ("workflow.targets[5]", 12, "a workflow target must be a mapping, got a string"),
        ("workflow.targets[6].id", 13, "duplicate workflow target id 't'"),
    ]


def test_workflow_shape_errors(tmp_path: Path) -> None:
    body = "targets: {t: {samples: [{at: 1, expect: true}]}}\n"
    assert one(tmp_path, "video: v.mp4\nworkflow: [a]\n" + body) == (
        "workflow", 2, "workflow must be a mapping, got a list")
    assert one(tmp_path, "video: v.mp4\nworkflow: {targets: {id: t}}\n" + body) == (
        "workflow.targets", 2, "workflow.targets must be a list, got a mapping")
    path, line, message = one(tmp_path, "video: v.mp4\nworkflow:\n  targets:\n  - {id: t, when: 2024-01-01}\n" + body)
    assert (path, line) == ("workflow.targets[0]", 4) and "JSON-like" in message
    assert ok(tmp_path, "video: v.mp4\nworkflow: {}\n" + body).targets[0].label is None
    assert ok(tmp_path, "video: v.mp4\nworkflow: {targets: []}\n" + body).targets[0].label is None


def test_target_field_types(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.mp4
        targets:
          a:
            label: 5
            config: [x]
            samples: [{at: 1, expect: true}]
          b:
            config: {when: 2024-01-01}
            samples: {at: 1}
          c: just text
          d:
            label: D
        """)
    assert [(p, line) for p, line, _ in problems] == [
        ("targets.a.label", 4), ("targets.a.config", 5), ("targets.b.config", 8), ("targets.b.samples", 9),
        ("targets.c", 10), ("targets.d.samples", 11)]
    messages = [m for _, _, m in problems]
    assert messages[0] == "label must be a string, got a number"
    assert messages[1] == "config must be a mapping, got a list"
    assert "JSON-like" in messages[2]
    assert messages[3] == "samples must be a list, got a mapping"
    assert messages[4] == "target 'c' must be a mapping, got a string"
    assert messages[5] == "a target needs `samples:`, a list of sample blocks"


def test_empty_samples_list_needs_allow_empty(tmp_path: Path) -> None:
    text = HEAD.replace("    samples:\n", "    samples: []\n")
    assert one(tmp_path, text) == (
        "targets.t.samples", 4, "samples is empty; add a sample block or pass --allow-empty")
    case = ok(tmp_path, text, allow_empty=True)
    assert case.targets[0].blocks == ()


def test_null_optional_sections_mean_omitted(tmp_path: Path) -> None:
    case = ok(tmp_path, """
        video: v.mp4
        description: null
        sampling: null
        sample_defaults: null
        workflow: null
        thresholds: null
        targets:
          t:
            label: null
            config: null
            sample_defaults: null
            samples:
            - range: [0, 1]
              every_s: null
              comment: null
              ignore: null
              expect: 1
              compare: {mode: numeric, tolerance: null}
        """)
    b = block(case)
    assert b.every_s == Fraction(1, 2) and b.ignore is None and b.comment is None
    assert b.compare == CompareConfig("numeric", 0.0)
    assert case.thresholds is None and case.description is None


# --- sample blocks: range and at ----------------------------------------------------------

def test_range_zero_to_three_every_tenth_is_thirty_clean_samples(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + "    - range: [0, 3]\n      every_s: 0.1\n      expect: true\n")
    expanded = times(case)
    assert len(expanded) == 30 == block_count(block(case))
    assert expanded == [Fraction(k, 10) for k in range(30)]
    # The floats handed to adapters are exactly the literals a user would write.
    literals = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7,
                1.8, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9]
    assert floats(expanded) == literals
    # Accumulating floats would not give these values.
    accumulated, t = [], 0.0
    for _ in range(30):
        accumulated.append(t)
        t += 0.1
    assert accumulated != literals


@pytest.mark.parametrize(("rng", "every", "expected"), [
    ("[1.0, 2.0]", "0.5", [1.0, 1.5]),
    ("[0, 1]", "0.3", [0.0, 0.3, 0.6, 0.9]),
    ("[0.05, 0.5]", "0.15", [0.05, 0.2, 0.35]),
    ("[0, 1]", "5", [0.0]),
    ("[0, 1]", "1", [0.0]),
    ("[2, 2.0001]", "0.5", [2.0]),
    ("[0.1, 0.7]", "0.2", [0.1, 0.3, 0.5]),
    ("[0, 0.7]", "0.1", [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
])
def test_ranges_are_half_open(tmp_path: Path, rng: str, every: str, expected: list[float]) -> None:
    case = ok(tmp_path, HEAD + f"    - range: {rng}\n      every_s: {every}\n      expect: true\n")
    assert floats(times(case)) == expected


def test_range_end_must_be_greater_than_start(tmp_path: Path) -> None:
    problems = found(tmp_path, HEAD + """\
    - range: [1, 1]
      expect: true
    - range: [2, 1.5]
      expect: true
""")
    assert problems == [
        ("targets.t.samples[0].range", 5, "range end must be greater than start, got [1, 1]"),
        ("targets.t.samples[1].range", 7, "range end must be greater than start, got [2, 1.5]"),
    ]


@pytest.mark.parametrize(("value", "path", "message"), [
    ("[0]", "targets.t.samples[0].range", "range must be a two-element list [start, end] in seconds"),
    ("[0, 1, 2]", "targets.t.samples[0].range", "range must be a two-element list [start, end] in seconds"),
    ("0-1", "targets.t.samples[0].range", "range must be a two-element list [start, end] in seconds"),
    ("{start: 0, end: 1}", "targets.t.samples[0].range", "range must be a two-element list [start, end] in seconds"),
    ("[-0.5, 0.5]", "targets.t.samples[0].range[0]", "range start must be nonnegative, got -0.5"),
    ("[0, .inf]", "targets.t.samples[0].range[1]", "range end must be finite, got inf"),
    ("[.nan, 1]", "targets.t.samples[0].range[0]", "range start must be finite, got nan"),
    ("[true, 2]", "targets.t.samples[0].range[0]", "range start must be a number of seconds, got a boolean"),
    ("[null, 2]", "targets.t.samples[0].range[0]", "range start must be a number of seconds, got null"),
    ('["0", 2]', "targets.t.samples[0].range[0]", "range start must be a number of seconds, got a string "
     "('0' is text in YAML; write it as a plain number such as 1.5 or 1.0e+9)"),
    ("[0, 1e3]", "targets.t.samples[0].range[1]", "range end must be a number of seconds, got a string "
     "('1e3' is text in YAML; write it as a plain number such as 1.5 or 1.0e+9)"),
])
def test_bad_ranges(tmp_path: Path, value: str, path: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - range: {value}\n      expect: true\n") == (path, 5, message)


def test_yaml_exponent_with_dot_and_sign_is_a_number(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + "    - range: [0, 1.0e+1]\n      every_s: 2.5e-0\n      expect: true\n")
    assert floats(times(case)) == [0.0, 2.5, 5.0, 7.5]


def test_at_single_and_list_are_sorted(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + """\
    - at: 3
      expect: true
    - at: [2.5, 0.2, 1]
      expect: true
""")
    assert block(case, index=0).times == (Fraction(3),)
    assert block(case, index=1).times == (Fraction(1, 5), Fraction(1), Fraction(5, 2))
    assert block(case, index=0).source() == "at" and block(case, index=1).source() == "at list"
    assert block(case, index=1).range is None and block(case, index=1).every_s is None


@pytest.mark.parametrize(("value", "path", "line", "message"), [
    ("-1", "targets.t.samples[0].at", 5, "at must be nonnegative, got -1"),
    (".nan", "targets.t.samples[0].at", 5, "at must be finite, got nan"),
    (".inf", "targets.t.samples[0].at", 5, "at must be finite, got inf"),
    ("-.inf", "targets.t.samples[0].at", 5, "at must be finite, got -inf"),
    ("true", "targets.t.samples[0].at", 5, "at must be a number of seconds, got a boolean"),
    ("'1.5'", "targets.t.samples[0].at", 5, "at must be a number of seconds, got a string "
     "('1.5' is text in YAML; write it as a plain number such as 1.5 or 1.0e+9)"),
    ("one", "targets.t.samples[0].at", 5, "at must be a number of seconds, got a string"),
    ("null", "targets.t.samples[0].at", 5, "at must be a number of seconds, got null"),
    ("{t: 1}", "targets.t.samples[0].at", 5, "at must be a number of seconds, got a mapping"),
    ("[]", "targets.t.samples[0].at", 5, "at list must not be empty"),
    ("[1, -2]", "targets.t.samples[0].at[1]", 5, "at must be nonnegative, got -2"),
    ("[1, [2]]", "targets.t.samples[0].at[1]", 5, "at must be a number of seconds, got a list"),
    ("1" + "0" * 400, "targets.t.samples[0].at", 5, "at must be finite, got an integer of 401 digits"),
])
def test_bad_at_values(tmp_path: Path, value: str, path: str, line: int, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - at: {value}\n      expect: true\n") == (path, line, message)


def test_duplicate_times_in_an_at_list(tmp_path: Path) -> None:
    assert one(tmp_path, HEAD + "    - at: [1, 2, 1.0]\n      expect: true\n") == (
        "targets.t.samples[0].at", 5, "duplicate sample time 1.0 in at list")
    # Times equal to nine decimals select the same frame: duplicates, as upstream says.
    assert one(tmp_path, HEAD + "    - at: [1, 1.0000000001]\n      expect: true\n") == (
        "targets.t.samples[0].at", 5, "duplicate sample time 1.0000000001 in at list (same as 1.0 to 9 decimals)")
    case = ok(tmp_path, HEAD + "    - at: [1, 1.000000001]\n      expect: true\n")
    assert len(block(case).times) == 2


def test_a_block_needs_exactly_one_of_range_and_at(tmp_path: Path) -> None:
    problems = found(tmp_path, HEAD + """\
    - expect: true
    - range: [0, 1]
      at: 2
      expect: true
    - at: 3
      expect: true
    - just text
""")
    assert problems == [
        ("targets.t.samples[0]", 5, "a sample block needs exactly one of `range: [start, end]` or `at:`"),
        ("targets.t.samples[1]", 6, "a sample block needs exactly one of `range: [start, end]` or `at:`"),
        ("targets.t.samples[3]", 11, "a sample block must be a mapping, got a string"),
    ]


# --- every_s -------------------------------------------------------------------------------

def test_every_s_precedence_block_then_case_then_half_a_second(tmp_path: Path) -> None:
    blocks = """\
    - range: [0, 1]
      expect: true
    - range: [2, 3]
      every_s: 0.25
      expect: true
"""
    case = ok(tmp_path, HEAD + blocks)
    assert block(case, index=0).every_s == Fraction(1, 2)
    assert floats(times(case, index=0)) == [0.0, 0.5]
    assert block(case, index=1).every_s == Fraction(1, 4)
    case = ok(tmp_path, "sampling:\n  every_s: 0.2\n" + HEAD.lstrip("\n") + blocks)
    assert floats(times(case, index=0)) == [0.0, 0.2, 0.4, 0.6, 0.8]
    assert floats(times(case, index=1)) == [2.0, 2.25, 2.5, 2.75]
    assert block(case, index=0).source() == "range [0.0, 1.0) every 0.2"
    assert block(case, index=1).source() == "range [2.0, 3.0) every 0.25"


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "0.0"])
def test_every_s_must_be_greater_than_zero(tmp_path: Path, value: str) -> None:
    problems = found(tmp_path, f"sampling:\n  every_s: {value}\n" + HEAD.lstrip("\n")
                     + f"    - range: [0, 1]\n      every_s: {value}\n      expect: true\n")
    assert problems == [
        ("sampling.every_s", 2, f"every_s must be greater than 0, got {value}"),
        ("targets.t.samples[0].every_s", 8, f"every_s must be greater than 0, got {value}"),
    ]


@pytest.mark.parametrize(("value", "message"), [
    ("fast", "every_s must be a number of seconds, got a string"),
    (".inf", "every_s must be finite, got inf"),
    ("true", "every_s must be a number of seconds, got a boolean"),
])
def test_every_s_must_be_a_finite_number(tmp_path: Path, value: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - range: [0, 1]\n      every_s: {value}\n      expect: true\n") == (
        "targets.t.samples[0].every_s", 6, message)


def test_every_s_on_an_at_block_is_rejected(tmp_path: Path) -> None:
    assert one(tmp_path, HEAD + "    - at: 1\n      every_s: 0.5\n      expect: true\n") == (
        "targets.t.samples[0].every_s", 6,
        "every_s only applies to range blocks; remove it from this `at` block")


def test_sampling_must_be_a_mapping(tmp_path: Path) -> None:
    assert one(tmp_path, "sampling: 0.5\n" + HEAD.lstrip("\n") + "    - at: 1\n      expect: true\n") == (
        "sampling", 1, "sampling must be a mapping, got a number")


# --- sample_defaults, field and compare ---------------------------------------------------

PRECEDENCE = """
video: v.mp4
sample_defaults:
  field: case.field
  compare: {mode: numeric, tolerance: 0.5}
targets:
  inherits_case:
    samples:
    - at: 1
      expect: 1
  target_defaults:
    sample_defaults:
      field: target.field
      compare: {mode: exact}
    samples:
    - at: 1
      expect: 1
    - at: 2
      expect: 1
      field: block.field
      compare: {mode: numeric}
    - at: 3
      expect: 1
      field: null
      compare: null
  target_clears:
    sample_defaults:
      field: null
      compare: null
    samples:
    - at: 1
      expect: 1
  target_sets_only_field:
    sample_defaults:
      field: only.field
    samples:
    - at: 1
      expect: 1
"""


def test_sample_defaults_precedence_block_target_case_builtin(tmp_path: Path) -> None:
    case = ok(tmp_path, PRECEDENCE)
    b = block(case, "inherits_case")
    assert (b.field, b.compare) == ("case.field", CompareConfig("numeric", 0.5))
    b = block(case, "target_defaults", 0)
    assert (b.field, b.compare) == ("target.field", CompareConfig("exact", 0.0))
    b = block(case, "target_defaults", 1)
    # A declared compare replaces the inherited one whole: no tolerance 0.5 leaks in.
    assert (b.field, b.compare) == ("block.field", CompareConfig("numeric", 0.0))
    b = block(case, "target_defaults", 2)
    assert (b.field, b.compare) == (None, None)
    b = block(case, "target_clears")
    assert (b.field, b.compare) == (None, None)
    b = block(case, "target_sets_only_field")
    assert (b.field, b.compare) == ("only.field", CompareConfig("numeric", 0.5))


def test_built_in_defaults_without_sample_defaults(tmp_path: Path) -> None:
    b = block(ok(tmp_path, HEAD + "    - at: 1\n      expect: 1\n"))
    assert b.field is None and b.compare is None


def test_only_field_compare_and_clip_can_be_defaulted(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.mp4
        sample_defaults:
          expect: true
          ignore: later
        targets:
          t:
            sample_defaults: {comment: x, every_s: 1}
            samples: [{at: 1, expect: true}]
        """)
    assert [p for p, _, _ in problems] == [
        "sample_defaults.expect", "sample_defaults.ignore",
        "targets.t.sample_defaults.comment", "targets.t.sample_defaults.every_s"]
    assert all(m.endswith("allowed keys: clip, compare, field") for _, _, m in problems)


@pytest.mark.parametrize(("value", "message"), [
    ('""', "field must not be empty"),
    ("'  '", "field must not be empty"),
    ("a..b", "field 'a..b' has an empty path part; use dot-separated names like result.matches or "
     "detections.0.label"),
    (".a", "field '.a' has an empty path part; use dot-separated names like result.matches or "
     "detections.0.label"),
    ("5", "field must be a string, got a number"),
    ("[a, b]", "field must be a string, got a list"),
])
def test_bad_fields(tmp_path: Path, value: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - at: 1\n      expect: 1\n      field: {value}\n") == (
        "targets.t.samples[0].field", 7, message)


def test_field_paths_with_list_indexes(tmp_path: Path) -> None:
    b = block(ok(tmp_path, HEAD + "    - at: 1\n      expect: a\n      field: detections.0.label\n"))
    assert b.field == "detections.0.label"


@pytest.mark.parametrize(("value", "path", "message"), [
    ("{tolerance: 0.1}", "targets.t.samples[0].compare",
     "compare needs a mode: one of exact, numeric, json_subset, set_equals, set_contains_any, set_contains_all"),
    ("{mode: fuzzy}", "targets.t.samples[0].compare.mode",
     "unknown comparison mode 'fuzzy'; use one of exact, numeric, json_subset, set_equals, set_contains_any, "
     "set_contains_all"),
    ("{mode: set_equal}", "targets.t.samples[0].compare.mode",
     "unknown comparison mode 'set_equal' (did you mean 'set_equals'?); use one of exact, numeric, json_subset, "
     "set_equals, set_contains_any, set_contains_all"),
    ("{mode: numeric, tolerance: -0.1}", "targets.t.samples[0].compare.tolerance",
     "tolerance must be nonnegative, got -0.1"),
    ("{mode: numeric, tolerance: wide}", "targets.t.samples[0].compare.tolerance",
     "tolerance must be a finite number, got a string"),
    ("{mode: numeric, tolerance: .nan}", "targets.t.samples[0].compare.tolerance",
     "tolerance must be a finite number, got nan"),
    ("{mode: numeric, tolerance: true}", "targets.t.samples[0].compare.tolerance",
     "tolerance must be a finite number, got a boolean"),
    ("{mode: numeric, tolerance: 1" + "0" * 400 + "}", "targets.t.samples[0].compare.tolerance",
     "tolerance must be a finite number, got a number"),
    ("numeric", "targets.t.samples[0].compare", "compare must be a mapping, got a string"),
])
def test_bad_compare(tmp_path: Path, value: str, path: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - at: 1\n      expect: 1\n      compare: {value}\n") == (path, 7, message)


@pytest.mark.parametrize("mode", ["exact", "numeric", "json_subset", "set_equals", "set_contains_any",
                                  "set_contains_all"])
def test_every_mode_is_accepted(tmp_path: Path, mode: str) -> None:
    expect = "[1, 2]" if mode.startswith("set_") else "1"
    b = block(ok(tmp_path, HEAD + f"    - at: 1\n      expect: {expect}\n      compare: {{mode: {mode}, tolerance: 2}}\n"))
    assert b.compare == CompareConfig(mode, 2.0)


@pytest.mark.parametrize(("mode", "expect", "message"), [
    ("numeric", "true", "numeric comparison needs a number in expect, got a boolean"),
    ("numeric", "'1'", "numeric comparison needs a number in expect, got a string"),
    ("numeric", "null", "numeric comparison needs a number in expect, got null"),
    ("numeric", "[1]", "numeric comparison needs a number in expect, got a list"),
    ("set_equals", "1", "set_equals comparison needs a list in expect, got a number"),
    ("set_contains_any", "{a: 1}", "set_contains_any comparison needs a list in expect, got a mapping"),
    ("set_contains_all", "abc", "set_contains_all comparison needs a list in expect, got a string"),
])
def test_mode_must_fit_the_expect_type(tmp_path: Path, mode: str, expect: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - at: 1\n      expect: {expect}\n      compare: {{mode: {mode}}}\n") == (
        "targets.t.samples[0].expect", 6, message)


def test_an_inherited_mode_must_fit_too_and_ignored_drafts_are_exempt(tmp_path: Path) -> None:
    text = """
        video: v.mp4
        sample_defaults: {compare: {mode: numeric}}
        targets:
          t:
            samples:
            - at: 1
              expect: ready
            - at: 2
              ignore: no label needed
            - at: 3
              expect: ready
              compare: null
        """
    assert one(tmp_path, text) == (
        "targets.t.samples[0].expect", 7, "numeric comparison needs a number in expect, got a string")


@pytest.mark.parametrize("expect", ["true", "'text'", "null", "1.5", "[1, [2]]", "{a: {b: [1]}}"])
def test_exact_and_json_subset_take_any_json_value(tmp_path: Path, expect: str) -> None:
    for mode in ("exact", "json_subset"):
        ok(tmp_path, HEAD + f"    - at: 1\n      expect: {expect}\n      compare: {{mode: {mode}}}\n")


# --- expect, comment, ignore -----------------------------------------------------------------

def test_drafts_and_explicit_null(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + """\
    - at: 1
    - at: 2
      expect: null
    - at: 3
      ignore: blurry
    - at: 4
      expect: false
      ignore: flaky
""")
    draft, null, ignored, ignored_with_expect = case.targets[0].blocks
    assert not draft.has_expect and draft.expect is None
    assert null.has_expect and null.expect is None
    assert not ignored.has_expect and ignored.ignore == "blurry"
    assert ignored_with_expect.has_expect and ignored_with_expect.expect is False


@pytest.mark.parametrize(("expect", "fragment"), [
    ("2024-01-01", "date"),
    ("2024-01-01 10:00:00", "datetime"),
    ("!!set {a: null, b: null}", "set"),
    ("!!binary aGVsbG8=", "bytes"),
    (".nan", "NaN"),
    (".inf", "inf"),
    ("[1, {x: .nan}]", "NaN"),
])
def test_expect_must_be_json_like(tmp_path: Path, expect: str, fragment: str) -> None:
    path, line, message = one(tmp_path, HEAD + f"    - at: 1\n      expect: {expect}\n")
    assert (path, line) == ("targets.t.samples[0].expect", 6)
    assert message.startswith("expect must be JSON-like (null, boolean, finite number, string, array, or "
                              "object with string keys): ")
    assert fragment.lower() in message.lower()


def test_expect_object_keys_must_be_strings(tmp_path: Path) -> None:
    path, line, message = one(tmp_path, HEAD + "    - at: 1\n      expect: {1: a}\n")
    assert (path, line) == ("targets.t.samples[0].expect.1", 6) and "keys must be strings" in message


@pytest.mark.parametrize(("value", "message"), [
    ('""', "ignore must not be empty"),
    ("'   '", "ignore must not be empty"),
    ("true", "ignore must be a string, got a boolean"),
    ("[a]", "ignore must be a string, got a list"),
])
def test_ignore_needs_a_nonempty_reason(tmp_path: Path, value: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - at: 1\n      expect: 1\n      ignore: {value}\n") == (
        "targets.t.samples[0].ignore", 7, message)


def test_comment_is_kept_and_must_be_text(tmp_path: Path) -> None:
    b = block(ok(tmp_path, HEAD + "    - at: 1\n      expect: 1\n      comment: Seated at 1 s.\n"))
    assert b.comment == "Seated at 1 s."
    assert one(tmp_path, HEAD + "    - at: 1\n      expect: 1\n      comment: [a]\n") == (
        "targets.t.samples[0].comment", 7, "comment must be a string, got a list")


def test_an_ignored_range_ignores_every_expanded_sample(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + "    - range: [0, 2]\n      ignore: camera covered\n")
    b = block(case)
    assert b.ignore == "camera covered" and len(times(case)) == 4


# --- overlaps --------------------------------------------------------------------------------

@pytest.mark.parametrize(("blocks", "path", "message"), [
    ("- range: [0, 1]\n- range: [0.5, 1.5]", "targets.t.samples[1]",
     "overlaps samples[0] of target 't' at 0.5s"),
    # Grids 0, 0.5 and 0.75, 1.25 never collide, but the declared intervals do.
    ("- range: [0, 1]\n- range: [0.75, 1.5]", "targets.t.samples[1]",
     "overlaps samples[0] of target 't' at 0.75s"),
    ("- range: [0, 1]\n  every_s: 5\n- at: 0.5", "targets.t.samples[1]",
     "overlaps samples[0] of target 't' at 0.5s"),
    ("- at: 0.5\n- range: [0, 1]", "targets.t.samples[1]",
     "overlaps samples[0] of target 't' at 0.5s"),
    ("- at: 0\n- range: [0, 1]", "targets.t.samples[1]", "overlaps samples[0] of target 't' at 0.0s"),
    ("- range: [0, 1]\n- at: 0", "targets.t.samples[1]", "overlaps samples[0] of target 't' at 0.0s"),
    ("- at: 1\n- at: [0.5, 1]", "targets.t.samples[1]", "overlaps samples[0] of target 't' at 1.0s"),
    ("- at: 1\n- at: 1.0000000001", "targets.t.samples[1]", "overlaps samples[0] of target 't' at"),
    ("- range: [0, 10]\n- range: [2, 3]", "targets.t.samples[1]", "overlaps samples[0] of target 't' at 2.0s"),
    ("- range: [2, 3]\n- range: [0, 10]", "targets.t.samples[1]", "overlaps samples[0] of target 't' at 2.0s"),
    ("- range: [0, 1]\n- range: [0, 1]", "targets.t.samples[1]", "overlaps samples[0] of target 't' at 0.0s"),
])
def test_overlapping_declarations_are_rejected(tmp_path: Path, blocks: str, path: str, message: str) -> None:
    body = textwrap.indent(blocks.replace("\n- ", "\n  expect: true\n- ") + "\n  expect: true\n", "    ")
    problem = one(tmp_path, HEAD + body)
    assert problem[0] == path and problem[2].startswith(message)
    assert problem[2].endswith("each time may be declared once per target (ranges are half-open: [start, end))")


@pytest.mark.parametrize("blocks", [
    "- range: [0, 1]\n- range: [1, 2]",
    "- range: [0, 1]\n- at: 1",
    "- at: 1\n- range: [0, 1]",
    "- range: [1, 2]\n- range: [0, 1]\n- at: [2, 3]",
    "- at: [1, 2]\n- at: [3, 1.5]",
    "- at: 1\n- at: 1.000000001",
])
def test_touching_declarations_are_fine(tmp_path: Path, blocks: str) -> None:
    body = textwrap.indent(blocks.replace("\n- ", "\n  expect: true\n- ") + "\n  expect: true\n", "    ")
    ok(tmp_path, HEAD + body)


def test_different_targets_may_use_the_same_times(tmp_path: Path) -> None:
    ok(tmp_path, """
        video: v.mp4
        targets:
          a:
            samples: [{range: [0, 2], expect: true}, {at: 3, expect: true}]
          b:
            samples: [{range: [0, 2], expect: true}, {at: 3, expect: true}]
        """)


def test_every_overlapping_block_is_reported_with_its_line(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.mp4
        targets:
          t:
            samples:
            - range: [0, 10]
              expect: true
            - at: 2
              expect: true
            - range: [5, 6]
              expect: true
            - at: 12
              expect: true
          u:
            samples:
            - at: 1
              expect: true
            - at: [0.5, 1]
              expect: true
        """)
    assert [(p, line) for p, line, _ in problems] == [
        ("targets.t.samples[1]", 7), ("targets.t.samples[2]", 9), ("targets.u.samples[1]", 17)]
    assert [m.split(";")[0] for _, _, m in problems] == [
        "overlaps samples[0] of target 't' at 2.0s", "overlaps samples[0] of target 't' at 5.0s",
        "overlaps samples[0] of target 'u' at 1.0s"]


def parse_value(value: dict[str, object]) -> tuple[Case | None, list[Problem]]:
    """Validate an already loaded document: the case checks alone, without YAML parsing."""
    return parse_case(YamlDocument("c.yaml", value), Path("/evals/cases/c.yaml"))


def test_ten_thousand_at_times_validate_without_quadratic_work() -> None:
    # Pairwise checks would be 10**8 steps; the sweep is one sort.
    listed = [k / 100 for k in range(10_000)]
    case, problems = parse_value({"video": "v.mp4", "targets": {"t": {"samples": [
        {"at": listed, "expect": True}]}}})
    assert problems == [] and case is not None and len(block(case).times) == 10_000
    blocks: list[dict[str, object]] = [{"at": t, "expect": True} for t in listed[:9_999]]
    case, problems = parse_value({"video": "v.mp4", "targets": {"t": {"samples": blocks}}})
    assert problems == [] and case is not None and len(case.targets[0].blocks) == 9_999
    blocks.append({"at": 50.0, "expect": True})
    _, problems = parse_value({"video": "v.mp4", "targets": {"t": {"samples": blocks}}})
    assert [p.path for p in problems] == ["targets.t.samples[9999]"]
    assert problems[0].message.startswith("overlaps samples[5000] of target 't' at 50.0s")


# --- the 10,000-sample cap --------------------------------------------------------------------

def test_exactly_ten_thousand_samples_is_allowed(tmp_path: Path) -> None:
    case = ok(tmp_path, HEAD + "    - range: [0, 2.5]\n      every_s: 0.00025\n      expect: true\n")
    assert block_count(block(case)) == MAX_SAMPLES_PER_CASE == 10_000


def test_the_cap_counts_every_target_and_ignored_samples(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.mp4
        targets:
          a:
            samples:
            - range: [0, 1]
              every_s: 0.001
              expect: true
          b:
            samples:
            - range: [0, 9]
              every_s: 0.001
              ignore: counted anyway
            - at: 9.5
              expect: true
        """)
    assert problems == [("targets.b.samples[1]", 13,
                         "this block would expand the case to 10001 samples, more than the limit of 10000 per "
                         "case; use a larger every_s, a shorter range, or split the case")]


def test_an_at_list_over_the_cap(tmp_path: Path) -> None:
    listed = ", ".join(str(k) for k in range(10_001))
    path, line, message = one(tmp_path, HEAD + f"    - at: [{listed}]\n      expect: true\n")
    assert (path, line) == ("targets.t.samples[0]", 5)
    assert "would expand the case to 10001 samples" in message


def test_a_pathological_range_fails_before_materialising(tmp_path: Path) -> None:
    # 10**12 samples: materialising them would never finish; the count is arithmetic.
    path, line, message = one(tmp_path, HEAD + "    - range: [0, 1000000000]\n      every_s: 0.001\n      expect: true\n")
    assert (path, line) == ("targets.t.samples[0]", 5)
    assert "would expand the case to 1000000000000 samples" in message
    assert range_count(Fraction(0), Fraction(10**9), Fraction(1, 1000)) == 10**12
    path, _, message = one(tmp_path, HEAD + "    - range: [0.1, 0.2]\n      every_s: 0.0000001\n      expect: true\n")
    assert "1000000 samples" in message


def test_range_count_matches_the_expansion() -> None:
    for start, end, every in [(0, 3, "0.1"), (1, 2, "0.5"), (0, 1, "0.3"), ("0.05", "0.5", "0.15"), (0, 1, 5)]:
        s, e, step = Fraction(start), Fraction(end), Fraction(every)
        expected = 0
        t = s
        while t < e:
            expected += 1
            t = s + expected * step
        assert range_count(s, e, step) == expected


# --- all problems in one pass -----------------------------------------------------------------

def test_every_problem_of_a_file_is_reported_in_one_pass(tmp_path: Path) -> None:
    problems = found(tmp_path, """
        video: v.avi
        sampling: {every_s: 0}
        targets:
          step_1:
            samples:
            - at: -1
              expect: true
            - range: [3, 2]
              expect: true
            - at: 4
              expect: 2024-01-01
          step_2:
            samples:
            - at: 1
              expect: x
              compare: {mode: fuzzy}
            - range: [0, 1]
              every_s: -2
              expect: true
        thresholds:
          min_pass_rate: 2
          per_target:
            nosuch: {min_pass_rate: 0.5}
        """)
    assert [(p, line) for p, line, _ in problems] == [
        ("video", 1),
        ("sampling.every_s", 2),
        ("targets.step_1.samples[0].at", 6),
        ("targets.step_1.samples[1].range", 8),
        ("targets.step_1.samples[2].expect", 11),
        ("targets.step_2.samples[0].compare.mode", 16),
        ("targets.step_2.samples[1].every_s", 18),
        ("thresholds.min_pass_rate", 21),
        ("thresholds.per_target.nosuch", 23),
    ]


# --- thresholds ---------------------------------------------------------------------------------

def test_case_thresholds(tmp_path: Path) -> None:
    body = HEAD + "    - at: 1\n      expect: true\n"
    case = ok(tmp_path, body + "thresholds: {min_pass_rate: 1, max_failures: 0}\n")
    assert case.thresholds == Thresholds(min_pass_rate=1.0, max_failures=0, per_target=None)
    assert isinstance(case.thresholds.min_pass_rate, float)
    case = ok(tmp_path, body + "thresholds: {per_target: {t: {min_pass_rate: 0}}}\n")
    assert case.thresholds == Thresholds(per_target={"t": 0.0})
    case = ok(tmp_path, body + "thresholds: {}\n")
    assert case.thresholds == Thresholds()
    case = ok(tmp_path, body + "thresholds: {min_pass_rate: null, max_failures: null, per_target: {t: {}}}\n")
    assert case.thresholds is not None and case.thresholds == Thresholds()


@pytest.mark.parametrize(("value", "path", "message"), [
    ("{min_pass_rate: 1.5}", "thresholds.min_pass_rate", "min_pass_rate must be a number from 0.0 to 1.0, got 1.5"),
    ("{min_pass_rate: -0.1}", "thresholds.min_pass_rate", "min_pass_rate must be a number from 0.0 to 1.0, got -0.1"),
    ("{min_pass_rate: true}", "thresholds.min_pass_rate", "min_pass_rate must be a number from 0.0 to 1.0, got True"),
    ("{min_pass_rate: '0.5'}", "thresholds.min_pass_rate", "min_pass_rate must be a number from 0.0 to 1.0, got '0.5'"),
    ("{max_failures: -1}", "thresholds.max_failures", "max_failures must be a nonnegative integer, got -1"),
    ("{max_failures: 1.5}", "thresholds.max_failures", "max_failures must be a nonnegative integer, got 1.5"),
    ("{max_failures: false}", "thresholds.max_failures", "max_failures must be a nonnegative integer, got False"),
    ("{per_target: {nosuch: {min_pass_rate: 0.5}}}", "thresholds.per_target.nosuch",
     "per_target names unknown target 'nosuch'; targets in this case: t"),
    ("{per_target: {t: 0.5}}", "thresholds.per_target.t", "per_target.t must be a mapping, got a number"),
    ("{per_target: {t: {min_pass_rate: 2}}}", "thresholds.per_target.t.min_pass_rate",
     "min_pass_rate must be a number from 0.0 to 1.0, got 2"),
    ("{per_target: [t]}", "thresholds.per_target", "per_target must be a mapping, got a list"),
    ("0.9", "thresholds", "thresholds must be a mapping, got a number"),
])
def test_bad_case_thresholds(tmp_path: Path, value: str, path: str, message: str) -> None:
    assert one(tmp_path, HEAD + f"    - at: 1\n      expect: true\nthresholds: {value}\n") == (path, 7, message)


def test_per_target_names_a_declared_target_even_when_that_target_is_broken(tmp_path: Path) -> None:
    problems = found(tmp_path, HEAD + "    - at: 1\n      expect: true\n  u: broken\n"
                     "thresholds: {per_target: {u: {min_pass_rate: 0.5}}}\n")
    assert [p for p, _, _ in problems] == ["targets.u"]


# --- description --------------------------------------------------------------------------------

def test_description_must_be_text(tmp_path: Path) -> None:
    assert one(tmp_path, "description: [a]\n" + HEAD.lstrip("\n") + "    - at: 1\n      expect: true\n") == (
        "description", 1, "description must be a string, got a list")
