"""Minimal-diff case-file edits: only edited blocks change, everything loads back exactly."""

from __future__ import annotations

import difflib
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from glasskit_eval.cases.parse import parse_case
from glasskit_eval.errors import ExitCode, UsageError
from glasskit_eval.yamltext._nodes import same
from glasskit_eval.yamltext._render import Style, block_lines, render_flow
from glasskit_eval.yamltext.edit import (
    CaseEditError,
    DeleteBlockKey,
    Edit,
    EditResult,
    ReplaceSamples,
    SetBlockKey,
    _apply,
    apply_edits,
    edit_samples,
    plain,
    rewrite,
)
from glasskit_eval.yamltext.source import load_yaml_text

DATA = Path(__file__).parent / "data" / "yamledit"


def set_block_key(text: str, target_id: str, block_index: int, key: str, value: Any) -> EditResult:
    return apply_edits(text, [SetBlockKey(target_id, block_index, key, value)])


def delete_block_key(text: str, target_id: str, block_index: int, key: str) -> EditResult:
    return apply_edits(text, [DeleteBlockKey(target_id, block_index, key)])
DEMO_CASE = Path(__file__).parent.parent / "fixtures" / "demo" / "eval" / "cases" / "kitchen.yaml"
FIXTURES = [*sorted(DATA.glob("*.yaml")), DEMO_CASE]


def read(name: str) -> str:
    with open(DATA / name, encoding="utf-8", newline="") as handle:
        return handle.read()


def diff(old: str, new: str) -> list[str]:
    """Changed lines only, as ``-line`` / ``+line`` without line endings."""
    return [
        line.rstrip("\r\n")
        for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def intended(text: str, edits: list[Edit]) -> Any:
    data = plain(yaml.safe_load(text))
    for edit in edits:
        _apply(data, edit)
    return data


def assert_loads_to(text: str, data: Any) -> None:
    assert same(yaml.safe_load(text), data), text


# --- line-level surgery on a hand-maintained file -------------------------------------


def test_filling_expect_inserts_exactly_one_line() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "dog_visible", 1, "expect", True)
    assert not result.fallback and result.changed and result.notes == ()
    assert diff(text, result.text) == ["+            expect: true"]
    # The comment that sat at the end of the block stays below the new line.
    assert "            expect: true\n            # no expect yet: seed fills it\n" in result.text


def test_replacing_a_value_in_place_keeps_quoting_of_the_key_and_trailing_comment() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "dog_visible", 2, "expect", True)
    assert diff(text, result.text) == [
        '-            "expect": false   # quoted keys',
        '+            "expect": true   # quoted keys',
    ]


def test_deleting_a_key_drops_only_its_lines() -> None:
    text = read("commented.yaml")
    result = delete_block_key(text, "dog_visible", 3, "comment")
    assert diff(text, result.text) == [
        "-              comment: |",
        "-                  Door opens.",
        "-                  Second line.",
    ]
    assert delete_block_key(text, "dog_visible", 3, "missing").text == text


def test_deleting_the_key_on_the_dash_line_pulls_the_next_key_up() -> None:
    text = read("commented.yaml")
    result = apply_edits(text, [DeleteBlockKey("dog_visible", 0, "range"),
                                SetBlockKey("dog_visible", 0, "at", 0.5)])
    assert diff(text, result.text) == [
        "-          - range: [0.0, 2.0]   # dark hallway",
        "+          - at: 0.5",
    ]


def test_new_keys_go_where_the_spec_puts_them() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "dog_visible", 0, "field", "result.dog_on_floor")
    assert diff(text, result.text) == ["+            field: result.dog_on_floor"]
    lines = result.text.splitlines()
    at = lines.index("            field: result.dog_on_floor")
    assert lines[at - 1].lstrip().startswith("- range:") and lines[at + 1].strip() == "expect: false"


def test_splitting_a_range_block_and_an_at_list_changes_only_those_blocks() -> None:
    text = read("commented.yaml")
    blocks = [
        {"range": [0.0, 2.0], "expect": False, "comment": "Empty hallway."},
        {"range": [2.0, 4.0], "every_s": 1.0, "expect": True},
        {"range": [4.0, 7.0], "every_s": 1.0, "expect": False},
        {"at": 7.5, "expect": False, "ignore": "Motion blur; yes: really"},
        {"at": 8.0, "expect": True, "ignore": "Motion blur; yes: really"},
        {"at": 9.0, "comment": "Door opens.\nSecond line.\n", "expect": False},
    ]
    result = edit_samples(text, "dog_visible", blocks)
    assert not result.fallback and result.notes == ()
    assert diff(text, result.text) == [
        "-          - range: [2.0, 7.0]",
        "+          - range: [2.0, 4.0]",
        "+            expect: true",
        '-          - "at": [7.5, 8.0]',
        "+          - range: [4.0, 7.0]",
        "+            every_s: 1.0",
        "+            expect: false",
        "+",
        '+          - "at": 7.5',
        "+",
        "+          - at: 8.0",
        "+            expect: true",
        "+            ignore: 'Motion blur; yes: really'",
    ]
    assert_loads_to(result.text, intended(text, [ReplaceSamples("dog_visible", blocks)]))


def test_moving_a_block_moves_its_text_with_its_comments() -> None:
    text = read("commented.yaml")
    old = yaml.safe_load(text)["targets"]["count"]["samples"]
    result = edit_samples(text, "count", [old[1], old[2], old[0]])
    assert diff(text, result.text) == [
        "-          - {at: 3.0, expect: 1}    # flow-style block",
        "+          - {at: 3.0, expect: 1}    # flow-style block",
    ]
    assert result.text.index("*count_cmp") < result.text.index("{at: 3.0")


def test_flow_style_blocks_are_edited_in_flow_style() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "count", 0, "expect", {"n": 2, "who": ["a", "b"]})
    assert diff(text, result.text) == [
        "-          - {at: 3.0, expect: 1}    # flow-style block",
        "+          - {at: 3.0, expect: {n: 2, who: [a, b]}}    # flow-style block",
    ]


def test_nested_values_in_block_style_use_the_file_indentation() -> None:
    text = read("commented.yaml")  # 4-space mappings, sequences indented by 2 under keys
    result = set_block_key(text, "dog_visible", 0, "expect", {"dog": True, "boxes": [{"x": 1}]})
    assert diff(text, result.text) == [
        "-            expect: false",
        "+            expect:",
        "+                dog: true",
        "+                boxes:",
        "+                  - x: 1",
    ]


def test_block_with_alias_value_is_edited_around_the_alias() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "count", 1, "expect", 2)
    assert diff(text, result.text) == ["+            expect: 2"]
    assert "compare: *count_cmp" in result.text


def test_crlf_file_keeps_crlf_everywhere() -> None:
    text = read("crlf.yaml")
    result = apply_edits(text, [SetBlockKey("lights_on", 1, "expect", True),
                                SetBlockKey("lights_on", 0, "comment", "Still dark.")])
    assert not result.fallback
    assert result.text.count("\n") == result.text.count("\r\n")
    assert diff(text, result.text) == [
        '-      comment: "Dark room."  # dark',
        '+      comment: Still dark.  # dark',
        "+      expect: true",
    ]


def test_empty_flow_samples_list_becomes_a_block_list() -> None:
    text = read("flow.yaml")
    result = edit_samples(text, "b", [{"at": 1.0, "expect": "x"}, {"at": 2.0}])
    assert diff(text, result.text) == [
        "-    samples: []",
        "+    samples:",
        "+    - at: 1.0",
        "+      expect: x",
        "+    - at: 2.0",
    ]


def test_flow_lists_keep_their_layout() -> None:
    text = read("flow.yaml")
    one_line = edit_samples(text, "a", [{"at": 1.0, "expect": "y"}, {"range": [2.0, 3.0]},
                                        {"at": 4.0}])
    assert diff(text, one_line.text) == [
        '-  a: {samples: [{at: 1.0, expect: "x"}, {range: [2.0, 3.0]}]}   # all flow',
        '+  a: {samples: [{at: 1.0, expect: y}, {range: [2.0, 3.0]}, {at: 4.0}]}   # all flow',
    ]
    multi_line = edit_samples(text, "c", [{"at": 0.5, "expect": 0.1}, {"at": 1.0},
                                          {"at": 1.5, "expect": 0.3}])
    assert diff(text, multi_line.text) == [
        "-      {at: 1.5},",
        "+      {at: 1.0},",
        "+      {at: 1.5, expect: 0.3},",
    ]


def test_odd_layouts_dash_alone_nested_lists_and_no_final_newline() -> None:
    text = read("odd.yaml")
    assert not text.endswith("\n")
    result = apply_edits(text, [
        SetBlockKey("shapes", 0, "expect", [{"label": "cat", "box": [0, 0, 12, 10]},
                                            {"label": "dog", "box": [5, 5, 20, 20]}]),
        SetBlockKey("words", 1, "expect", "no"),
    ])
    assert not result.fallback
    assert diff(text, result.text) == [
        "-          box: [0, 0, 10, 10]",
        "+          box: [0, 0, 12, 10]",
        "-      expect: ~",
        "+      expect: 'no'",
    ]
    assert not result.text.endswith("\n")


def test_appending_after_the_last_line_without_newline() -> None:
    text = read("odd.yaml")
    blocks = [*yaml.safe_load(text)["targets"]["words"]["samples"], {"at": 2.0, "expect": "ok"}]
    result = edit_samples(text, "words", blocks)
    assert result.text == text + "\n    - at: 2.0\n      expect: ok\n"


def test_unicode_is_written_as_is() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "dog_visible", 1, "comment", "Hündin läuft — 日本語 ✓")
    assert "comment: Hündin läuft — 日本語 ✓\n" in result.text
    assert "ünïcödé ok" in result.text


def test_rebuilt_blocks_report_dropped_comments() -> None:
    text = read("commented.yaml")
    result = edit_samples(text, "dog_visible", [])
    assert not result.fallback
    assert "samples: []" in result.text
    assert result.notes == ("targets.dog_visible.samples: re-rendered; "
                            "3 comment line(s) inside it were dropped",)


def test_edits_to_several_targets_in_one_write() -> None:
    text = read("commented.yaml")
    edits: list[Edit] = [SetBlockKey("dog_visible", 1, "expect", True),
                         SetBlockKey("count", 1, "expect", 1),
                         SetBlockKey("count", 2, "comment", "two")]
    result = apply_edits(text, edits)
    assert diff(text, result.text) == [
        "+            expect: true",
        "+            expect: 1",
        "+            comment: two",
    ]
    case, problems = parse_case(load_yaml_text(result.text, "c.yaml")[0], DATA / "c.yaml")
    assert problems == [] and case is not None


def test_unchanged_edit_returns_the_same_text() -> None:
    text = read("commented.yaml")
    result = set_block_key(text, "dog_visible", 0, "expect", False)
    assert result.text is text and not result.changed and not result.fallback


# --- rendering ----------------------------------------------------------------------------


TRICKY: list[Any] = [
    None, True, False, 0, -5, 10**20, 0.1, 1e16, 1e-7, -0.0, 2.5, 3.0, math.inf, -math.inf,
    "", "yes", "No", "on", "1.0", "1e3", "0x1F", "0o17", "1_000", "12:30", "2020-01-01", "null", "~",
    "a: b", "a:b", "# x", "x # y", "- x", "? x", "[x]", "{x}", ",", "@x", "%x", "`x", "!x", "&x",
    "*x", "|", ">", "'", '"', "quote ' \" mix", " lead", "trail ", "tab\tx", "multi\nline",
    "a\u2028b", "a\x85b", "bell\x07", "\ufeffbom", "日本語", "emoji 🎥", "back\\slash", "---", "...",
    "=", "<<", ".inf", ".nan", "-", "-1", "+1", "1.", ".5",
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_every_scalar_round_trips_in_block_and_flow_context(value: Any) -> None:
    rendered = render_flow(value)
    assert same(yaml.safe_load(f"k: {rendered}"), {"k": value})
    assert same(yaml.safe_load(f"- {rendered}"), [value])
    assert same(yaml.safe_load(f"[{rendered}, {rendered}]"), [value, value])
    assert same(yaml.safe_load(f"{{{rendered}: 1, k: {rendered}}}"), {value: 1, "k": value})


def test_nan_and_float_formatting() -> None:
    assert render_flow(0.1) == "0.1" and render_flow(1e16) == "1.0e+16"
    assert math.isnan(yaml.safe_load(render_flow(math.nan)))
    assert render_flow("1.0") == "'1.0'" and render_flow("multi\nline") == '"multi\\nline"'


def test_block_rendering_round_trips_nested_values() -> None:
    value = {"a": [{"b": [1, [2, {"c": None}]], "d": {}}, [], "x"], "e": {"f": {"g": "yes"}}}
    for style in (Style(), Style(map_indent=4, seq_indent=2, item_offset=4), Style(flow_mappings=True)):
        assert same(yaml.safe_load("\n".join(block_lines(value, 0, style))), value)


# --- properties over many generated edits ---------------------------------------------------


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.15:
        return {rng.choice(["a", "label", "yes", "1", "k: v", "日"]): _value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    if depth < 2 and roll < 0.3:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice(TRICKY)


def _block(rng: random.Random) -> dict[str, Any]:
    block: dict[str, Any] = {"at": rng.choice([1.0, [1.0, 2.0]])} if rng.random() < 0.5 else {
        "range": [0.0, rng.choice([1.0, 2.5])]}
    for key in ("expect", "comment", "ignore", "field", "every_s"):
        if rng.random() < 0.3:
            block[key] = _value(rng)
    return block


def _edit(rng: random.Random, data: Any, target: str) -> Edit:
    samples = data["targets"][target].get("samples") or []
    if samples and rng.random() < 0.5:
        index = rng.randrange(len(samples))
        key = rng.choice(["expect", "comment", "ignore", "field", "compare", "at", "range", "every_s"])
        if rng.random() < 0.3:
            return DeleteBlockKey(target, index, key)
        return SetBlockKey(target, index, key, _value(rng))
    new = [dict(b) for b in samples]
    op = rng.choice(["fill", "split", "delete", "move", "insert", "edit"])
    if op == "fill":
        for block in new:
            block.setdefault("expect", _value(rng))
    elif op == "split" and new:
        i = rng.randrange(len(new))
        new[i:i + 1] = [dict(new[i], expect=_value(rng)) for _ in range(rng.randint(2, 3))]
    elif op == "delete" and new:
        del new[rng.randrange(len(new))]
    elif op == "move" and len(new) > 1:
        new.insert(rng.randrange(len(new)), new.pop(rng.randrange(len(new))))
    elif op == "insert":
        new.insert(rng.randrange(len(new) + 1), _block(rng))
    elif new:
        i = rng.randrange(len(new))
        new[i] = dict(new[i], comment=_value(rng))
    return ReplaceSamples(target, new)


def _untouched_lines(text: str, target: str) -> tuple[list[str], list[str]]:
    """Lines before the target's ``samples`` key and after its samples list (and their comments)."""
    root = yaml.compose(text)
    targets = next(v for k, v in root.value if k.value == "targets")
    node = next(v for k, v in targets.value if k.value == target)
    key, value = next((k, v) for k, v in node.value if k.value == "samples")
    lines = text.splitlines(True)
    end = value.end_mark.line
    if isinstance(value, yaml.SequenceNode) and not value.flow_style:
        # A block list ends where the next key starts; comments before it may move with items.
        end = value.end_mark.line if value.end_mark.column == 0 else value.end_mark.line + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].lstrip().startswith("#")):
            end += 1
        return lines[:key.start_mark.line], lines[end:]
    return lines[:key.start_mark.line], lines[end + 1:]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_generated_edits_load_back_exactly_and_touch_only_their_target(path: Path) -> None:
    with open(path, encoding="utf-8", newline="") as handle:
        text = handle.read()
    rng = random.Random(path.name)
    original = intended(text, [])
    # Sample edits only: a stream target (``events``) has no samples list to edit.
    untouched = {target: _untouched_lines(text, target) for target, body in original["targets"].items()
                 if "events" not in body}
    for _round in range(50):
        target = rng.choice(list(untouched))
        data = plain(original)
        edits: list[Edit] = []
        for _ in range(rng.randint(1, 3)):
            edits.append(_edit(rng, data, target))
            _apply(data, edits[-1])
        result = apply_edits(text, edits)
        assert not result.fallback, (result.reason, edits)
        assert_loads_to(result.text, data)
        before, after = untouched[target]
        new_lines = result.text.splitlines(True)
        assert new_lines[:len(before)] == before
        if after:
            assert new_lines[-len(after):] == after, edits


def test_generated_edits_across_targets_at_once() -> None:
    text = read("commented.yaml")
    rng = random.Random(7)
    original = intended(text, [])
    for _round in range(30):
        edits: list[Edit] = []
        data = plain(original)
        for target in rng.sample(["dog_visible", "count"], 2):
            edits.append(_edit(rng, data, target))
            _apply(data, edits[-1])
        result = apply_edits(text, edits)
        assert not result.fallback
        assert_loads_to(result.text, data)
        assert result.text.startswith("---\n# Case: the dog walks through the hallway.\n")
        assert result.text.endswith("thresholds:\n    min_pass_rate: 0.9 # gate\n")


# --- fallback -------------------------------------------------------------------------------------


ALIASED = """\
# header comment
targets:
  a:
    samples:
    - &shared {at: 1.0, expect: 1}  # shared with b
  b:
    samples:
    - *shared
"""


def test_editing_an_anchored_block_used_elsewhere_falls_back_to_a_full_render() -> None:
    # Editing the anchor in place would also change b's alias: the check catches it.
    result = set_block_key(ALIASED, "a", 0, "expect", 2)
    assert result.fallback and result.changed
    assert result.reason is not None and "undefined alias" in result.reason
    assert result.reason == "the in-place edit would not parse (found undefined alias 'shared')"
    assert_loads_to(result.text, {"targets": {"a": {"samples": [{"at": 1.0, "expect": 2}]},
                                              "b": {"samples": [{"at": 1.0, "expect": 1}]}}})
    assert result.text.startswith("# header comment\n")


def test_editing_the_alias_side_stays_minimal() -> None:
    result = set_block_key(ALIASED, "b", 0, "expect", 2)
    assert not result.fallback
    assert diff(ALIASED, result.text) == ["-    - *shared", "+    - at: 1.0", "+      expect: 2"]
    assert result.notes == ("targets.b.samples[0]: re-rendered",)


def test_fallback_keeps_line_endings_and_file_style() -> None:
    text = ALIASED.replace("\n", "\r\n")
    result = set_block_key(text, "a", 0, "expect", 2)
    assert result.fallback
    assert result.text.count("\n") == result.text.count("\r\n")


def test_rewrite_to_arbitrary_data() -> None:
    text = read("commented.yaml")
    data = yaml.safe_load(text)
    data["thresholds"]["max_failures"] = 2
    del data["description"]
    result = rewrite(text, data)
    assert not result.fallback
    assert diff(text, result.text) == [
        '-description: "Hallway: dog enters at 2 s, leaves at 7 s — ünïcödé ok"',
        "+    max_failures: 2",
    ]
    fill = yaml.safe_load(text)
    fill["targets"]["dog_visible"]["samples"][1]["expect"] = True  # appended last in the dict
    assert diff(text, rewrite(text, fill).text) == ["+            expect: true"]
    top_level_change = rewrite(text, [1, 2])
    assert top_level_change.fallback and yaml.safe_load(top_level_change.text) == [1, 2]


# --- bad edits ----------------------------------------------------------------------------------


def test_bad_edits_name_the_yaml_path() -> None:
    text = read("commented.yaml")
    with pytest.raises(CaseEditError, match=r"targets\.nope: no such target \(targets: dog_visible, count\)"):
        set_block_key(text, "nope", 0, "expect", 1)
    with pytest.raises(CaseEditError, match=r"targets\.count\.samples\[9\]: no such sample block; the target has 3"):
        set_block_key(text, "count", 9, "expect", 1)
    with pytest.raises(CaseEditError, match=r"samples\[0\]: a sample block must be a mapping"):
        edit_samples(text, "count", [1])  # type: ignore[list-item]
    with pytest.raises(CaseEditError, match="not valid YAML at line 3"):
        set_block_key("targets:\n  - a: [\n", "a", 0, "expect", 1)
    error = CaseEditError("x")
    assert isinstance(error, UsageError) and error.exit_code == ExitCode.ERROR


CLIP_TEXT = """\
video: v.mp4
targets:
  gesture:
    samples:
    - range: [20, 30]
      every_s: 2
      clip: {before_s: 1.0, after_s: 0.5}  # the wave takes a second
      comment: hand at the door
    - at: 5
"""


def test_a_clip_is_kept_and_new_clips_go_next_to_the_times_they_widen() -> None:
    result = apply_edits(CLIP_TEXT, [SetBlockKey("gesture", 0, "expect", "wave"),
                                     SetBlockKey("gesture", 1, "expect", "none"),
                                     SetBlockKey("gesture", 1, "clip", {"before_s": 2.0, "every_s": 0.25})])
    assert diff(CLIP_TEXT, result.text) == [
        "+      expect: wave",
        "+      clip: {before_s: 2.0, every_s: 0.25}",
        "+      expect: none",
    ]
    assert result.text.splitlines()[6:8] == ["      clip: {before_s: 1.0, after_s: 0.5}  # the wave takes a second",
                                             "      expect: wave"]
    # A block written anew (seed's split, the review page's inserts) puts clip after the times.
    clip = {"before_s": 1.0, "after_s": 0.5}
    split = edit_samples(CLIP_TEXT, "gesture", [
        {"expect": "none", "comment": "hand at the door", "clip": clip, "every_s": 2, "range": [20, 24]},
        {"expect": "wave", "clip": clip, "every_s": 2, "range": [24, 30]}, {"at": 5}])
    assert not split.fallback
    assert split.text.splitlines()[4:12] == [
        "    - range: [20, 24]",
        "      every_s: 2",
        "      clip: {before_s: 1.0, after_s: 0.5}  # the wave takes a second",
        "      expect: none",
        "      comment: hand at the door",
        "    - range: [24, 30]",
        "      every_s: 2",
        "      clip: {before_s: 1.0, after_s: 0.5}",
    ]
    assert yaml.safe_load(split.text)["targets"]["gesture"]["samples"][1]["clip"] == clip
