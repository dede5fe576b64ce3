"""The ``clip`` sample setting in case files: inheritance and located problems (no video is read)."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import load_case

from glasskit_eval.cases.model import MAX_CLIP_FRAMES, Case, ClipSpec

F = Fraction


def parse(tmp_path: Path, text: str) -> tuple[Case | None, list[tuple[str, int | None, str]]]:
    cases = tmp_path / "eval" / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    path = cases / "c.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    case, problems = load_case(path)
    assert all(p.file == str(path) for p in problems)
    return case, [(p.path, p.line, p.message) for p in problems]


def clips(case: Case | None, target: str) -> list[ClipSpec | None]:
    assert case is not None
    spec = case.target(target)
    assert spec is not None
    return [block.clip for block in spec.blocks]


def test_a_case_without_clip_has_no_clips(tmp_path: Path) -> None:
    case, problems = parse(tmp_path, """
        video: v.mp4
        targets:
          t:
            samples: [{at: 1, expect: true}, {range: [2, 3], expect: false}]
        """)
    assert problems == []
    assert clips(case, "t") == [None, None]


def test_clip_keys_and_their_defaults(tmp_path: Path) -> None:
    case, problems = parse(tmp_path, """
        video: v.mp4
        targets:
          t:
            samples:
            - {at: 5, expect: 1, clip: {before_s: 2.0, every_s: 0.25}}
            - {at: 6, expect: 1, clip: {before_s: 1, after_s: 0.5, edge: clamp}}
            - {at: 7, expect: 1, clip: {}}
        """)
    assert problems == []
    assert clips(case, "t") == [
        ClipSpec(before_s=F(2), after_s=F(0), every_s=F(1, 4), edge="error"),
        ClipSpec(before_s=F(1), after_s=F(1, 2), every_s=None, edge="clamp"),
        ClipSpec(),
    ]


def test_clip_is_inherited_overridden_and_cleared_as_one_value(tmp_path: Path) -> None:
    case, problems = parse(tmp_path, """
        video: v.mp4
        sample_defaults:
          clip: {before_s: 2.0, every_s: 0.25}
        targets:
          plain:
            samples:
            - {at: 5, expect: 1}
            - {at: 6, expect: 1, clip: {after_s: 0.5}}
            - {at: 7, expect: 1, clip: null}
          own:
            sample_defaults:
              clip: {before_s: 1.0}
            samples:
            - {at: 5, expect: 1}
          cleared:
            sample_defaults:
              clip: null
            samples:
            - {at: 5, expect: 1}
            - {at: 6, expect: 1, clip: {every_s: 0.1}}
        """)
    assert problems == []
    case_clip = ClipSpec(before_s=F(2), every_s=F(1, 4))
    # Replaced whole: the block's after_s does not keep the case's before_s or every_s.
    assert clips(case, "plain") == [case_clip, ClipSpec(after_s=F(1, 2)), None]
    assert clips(case, "own") == [ClipSpec(before_s=F(1))]
    assert clips(case, "cleared") == [None, ClipSpec(every_s=F(1, 10))]


def test_grid_count_is_exact() -> None:
    assert ClipSpec(before_s=F(2), every_s=F(1, 4)).grid_count == 9
    # 0.3 * 3 = 0.9 <= 1.0 < 0.3 * 4: exact arithmetic, no float drift.
    assert ClipSpec(before_s=F(1), after_s=F(1, 2), every_s=F(3, 10)).grid_count == 5
    assert ClipSpec(before_s=F(3, 10), every_s=F(1, 10)).grid_count == 4
    assert ClipSpec(before_s=F(1)).grid_count is None


HEAD = """
video: v.mp4
targets:
  t:
    samples:
    - at: 5
      expect: true
"""  # the block's clip is on line 7


@pytest.mark.parametrize(("clip", "path", "words"), [
    ("{before_s: -1}", "clip.before_s", ["clip before_s must be 0 or more", "got -1", "before_s: 1"]),
    ("{after_s: -0.5}", "clip.after_s", ["clip after_s must be 0 or more", "got -0.5"]),
    ("{every_s: 0}", "clip.every_s", ["clip every_s must be greater than 0, got 0", "leave it out"]),
    ("{every_s: -0.25}", "clip.every_s", ["clip every_s must be greater than 0, got -0.25"]),
    ("{before_s: '1.0'}", "clip.before_s", ["clip before_s must be a number of seconds, got a string"]),
    ("{before_s: .inf}", "clip.before_s", ["clip before_s must be finite"]),
    ("{before_s: 1, afterr_s: 1}", "clip.afterr_s",
     ["unknown key 'afterr_s' (did you mean 'after_s'?)", "allowed keys: after_s, before_s, edge, every_s"]),
    ("{edge: clmp}", "clip.edge", ["unknown clip edge 'clmp' (did you mean 'clamp'?)", "use error", "clamp"]),
    ("{edge: true}", "clip.edge", ["unknown clip edge True"]),
    ("{before_s: 100, every_s: 0.05}", "clip",
     ["this clip asks for 2001 frames", f"more than the limit of {MAX_CLIP_FRAMES:,} per clip",
      "larger every_s"]),
    ("[1, 2]", "clip", ["clip must be a mapping, got a list"]),
    ("2.0", "clip", ["clip must be a mapping, got a number"]),
])
def test_bad_clip_values_are_located(tmp_path: Path, clip: str, path: str, words: list[str]) -> None:
    case, problems = parse(tmp_path, HEAD + f"      clip: {clip}\n")
    assert case is None
    assert len(problems) == 1, problems
    where, line, message = problems[0]
    assert (where, line) == (f"targets.t.samples[0].{path}", 7)
    for word in words:
        assert word in message, message


def test_the_largest_clip_is_accepted(tmp_path: Path) -> None:
    # 1,024 frames: t-102.3 ... t in steps of 0.1.
    case, problems = parse(tmp_path, HEAD.replace("at: 5", "at: 200") + "      clip: {before_s: 102.3, every_s: 0.1}\n")
    assert problems == []
    spec = clips(case, "t")[0]
    assert spec is not None and spec.grid_count == MAX_CLIP_FRAMES


def test_bad_clips_in_sample_defaults_are_located_where_written(tmp_path: Path) -> None:
    case, problems = parse(tmp_path, """
        video: v.mp4
        sample_defaults:
          clip:
            before_s: -2
        targets:
          t:
            sample_defaults:
              clip: {every_s: 0, edge: wrap}
            samples:
            - {at: 5, expect: 1}
        """)
    assert case is None
    assert [(p, line) for p, line, _ in problems] == [
        ("sample_defaults.clip.before_s", 4),
        ("targets.t.sample_defaults.clip.every_s", 8),
        ("targets.t.sample_defaults.clip.edge", 8),
    ]


def test_every_clip_problem_of_a_file_is_reported_in_one_pass(tmp_path: Path) -> None:
    case, problems = parse(tmp_path, """
        video: v.mp4
        targets:
          t:
            samples:
            - at: 1
              expect: 1
              clip:
                before_s: -1
                every_s: 0
                edge: both
                step: 1
        """)
    assert case is None
    assert [(p, line) for p, line, _ in problems] == [
        ("targets.t.samples[0].clip.before_s", 8),
        ("targets.t.samples[0].clip.every_s", 9),
        ("targets.t.samples[0].clip.edge", 10),
        ("targets.t.samples[0].clip.step", 11),
    ]
