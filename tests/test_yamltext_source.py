"""YAML loading with line numbers, duplicate keys and safe limits (glasskit_eval.yamltext.source)."""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path

import pytest

from glasskit_eval.errors import Problem
from glasskit_eval.yamltext import source as yamlsource
from glasskit_eval.yamltext.source import YamlDocument, format_path, load_yaml_file, load_yaml_text

LOADERS = sorted({yamlsource._Loader, yamlsource._PythonLoader}, key=lambda cls: cls.__name__)


@pytest.fixture(autouse=True, params=LOADERS, ids=lambda cls: cls.__name__)
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> type:
    """Every test runs on libyaml's parser (when PyYAML has it) and on the pure-Python fallback."""
    monkeypatch.setattr(yamlsource, "_Loader", request.param)
    return request.param  # type: ignore[no-any-return]


def load(text: str) -> tuple[YamlDocument, list[Problem]]:
    return load_yaml_text(textwrap.dedent(text).lstrip("\n"), "case.yaml")


def test_format_path_renders_keys_and_indexes() -> None:
    assert format_path(()) == ""
    assert format_path(("video",)) == "video"
    assert format_path(("targets", "step_1", "samples", 2, "range")) == "targets.step_1.samples[2].range"
    assert format_path(("targets", "t", "samples", 0, "at", 3)) == "targets.t.samples[0].at[3]"
    assert format_path((0, "a")) == "[0].a"


def test_values_are_plain_python_and_every_node_has_its_line() -> None:
    doc, problems = load("""
        video: a.mp4
        targets:
          step_1:
            samples:
            - at: 1
              expect: true
            - range:
              - 0
              - 2.5
              expect: {a: [1, 2]}
        """)
    assert problems == []
    assert doc.value == {"video": "a.mp4", "targets": {"step_1": {"samples": [
        {"at": 1, "expect": True}, {"range": [0, 2.5], "expect": {"a": [1, 2]}}]}}}
    assert doc.line(("video",)) == 1
    # A mapping value is located at its key, not at the first line of the block below it.
    assert doc.line(("targets",)) == 2
    assert doc.line(("targets", "step_1")) == 3
    assert doc.line(("targets", "step_1", "samples")) == 4
    assert doc.line(("targets", "step_1", "samples", 0)) == 5
    assert doc.line(("targets", "step_1", "samples", 1)) == 7
    assert doc.line(("targets", "step_1", "samples", 1, "range")) == 7
    assert doc.line(("targets", "step_1", "samples", 1, "range", 1)) == 9
    assert doc.line(("targets", "step_1", "samples", 1, "expect", "a", 1)) == 10


def test_line_falls_back_to_the_closest_known_parent() -> None:
    doc, _ = load("""
        video: a.mp4
        targets:
          t:
            samples: []
        """)
    assert doc.line(("targets", "t", "samples", 0, "range")) == 4
    assert doc.line(("nothing", "here")) == 1
    empty, _ = load("")
    assert empty.line(("video",)) is None


def test_problem_names_file_path_and_line() -> None:
    doc, _ = load("""
        targets:
          step_1:
            samples:
            - at: 1
            - at: 2
            - range: [0, 1]
        """)
    problem = doc.problem(("targets", "step_1", "samples", 2, "range"), "range is bad")
    assert problem == Problem("case.yaml", "targets.step_1.samples[2].range", "range is bad", 6)
    assert str(problem) == "case.yaml:6: targets.step_1.samples[2].range: range is bad"


def test_empty_document_has_no_value_and_no_problems() -> None:
    for text in ("", "# only a comment\n", "---\n"):
        doc, problems = load(text)
        assert doc.value is None and problems == []


def test_duplicate_keys_are_rejected_with_their_line() -> None:
    doc, problems = load("""
        video: a.mp4
        targets:
          t:
            samples: []
          t:
            samples: []
        video: b.mp4
        """)
    assert [(p.path, p.line) for p in problems] == [("targets.t", 5), ("video", 7)]
    assert all("duplicate key" in p.message for p in problems)
    assert all(p.file == "case.yaml" for p in problems)
    # The first value is the one kept, never silently the last.
    assert doc.value["video"] == "a.mp4"


def test_duplicate_keys_inside_flow_mappings_and_lists() -> None:
    _, problems = load("""
        targets:
          t:
            samples:
            - {at: 1, expect: true, expect: false}
        """)
    assert [(p.path, p.line) for p in problems] == [("targets.t.samples[0].expect", 4)]


def test_merge_keys_may_be_overridden_without_a_duplicate_error() -> None:
    doc, problems = load("""
        base: &base {every_s: 0.5, expect: true}
        one:
          <<: *base
          expect: false
        two:
          <<: [*base, {every_s: 2, extra: 1}]
        """)
    assert problems == []
    assert doc.value["one"] == {"every_s": 0.5, "expect": False}
    # YAML: earlier mappings in a merge list win over later ones.
    assert doc.value["two"] == {"every_s": 0.5, "extra": 1, "expect": True}


def test_merge_sources_nest_and_keep_their_own_lines() -> None:
    doc, problems = load("""
        base: &base
          compare: {mode: numeric}
          field: x
        more: &more
          <<: *base
          field: y
        one:
          <<: *more
          at: 1
        """)
    assert problems == []
    assert doc.value["one"] == {"compare": {"mode": "numeric"}, "field": "y", "at": 1}
    assert doc.line(("one",)) == 7
    assert doc.line(("one", "at")) == 9
    # Merged values are located where they are written, in the anchored mapping.
    assert doc.line(("one", "field")) == 6
    assert doc.line(("one", "compare", "mode")) == 2


@pytest.mark.parametrize("value", ["5", "null", "[a]", "[[a]]"])
def test_merging_something_other_than_mappings_is_a_problem(value: str) -> None:
    _, problems = load(f"one:\n  <<: {value}\n  a: 1\n")
    assert [(p.path, p.line, p.message) for p in problems] == [
        ("one", 2, "a merge key (<<) needs a mapping or a list of mappings")]


def test_explicit_duplicates_next_to_a_merge_are_still_rejected() -> None:
    _, problems = load("""
        base: &base {a: 1}
        one:
          <<: *base
          b: 1
          b: 2
        """)
    assert [(p.path, p.line) for p in problems] == [("one.b", 5)]


@pytest.mark.parametrize(("key", "read_as"), [
    ("on", "the boolean true"),
    ("no", "the boolean false"),
    ("1", "the number 1"),
    ("1.5", "the number 1.5"),
    ("null", "null"),
    ("~", "null"),
    ("2024-01-01", "a date"),
])
def test_keys_that_yaml_reads_as_non_strings_are_rejected_with_a_quoting_hint(key: str, read_as: str) -> None:
    doc, problems = load(f"""
        targets:
          {key}:
            samples: []
        """)
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.path, problem.line) == (f"targets.{key}", 2)
    assert read_as in problem.message and f'quote it: "{key}"' in problem.message
    assert doc.value == {"targets": {}}


def test_on_and_one_are_not_reported_as_duplicates_of_each_other() -> None:
    # Python's True == 1 would otherwise make them collide in a dict.
    _, problems = load("""
        targets:
          1: {}
          on: {}
        """)
    assert [p.path for p in problems] == ["targets.1", "targets.on"]
    assert not any("duplicate" in p.message for p in problems)


def test_quoted_keys_are_strings() -> None:
    doc, problems = load("""
        targets:
          "on": {}
          '1': {}
        """)
    assert problems == [] and list(doc.value["targets"]) == ["on", "1"]


def test_complex_keys_are_rejected() -> None:
    _, problems = load("""
        targets:
          ? [a, b]
          : 1
        """)
    assert len(problems) == 1 and "keys must be strings" in problems[0].message
    assert problems[0].path == "targets"


@pytest.mark.parametrize(("text", "line"), [
    ("video: a.mp4\ntargets: {t: {samples: [{at: 1, expect: [}]}}\n", 2),
    ("video: a.mp4\ntargets:\n  t:\n    samples:\n  - at: 1\n", 5),
    ("video: a.mp4\n\tbad: tab\n", 2),
    ("a: 1\n---\nb: 2\n", 2),
    ('video: "unterminated\n', 2),
])
def test_invalid_yaml_is_one_problem_with_its_line(text: str, line: int) -> None:
    doc, problems = load_yaml_text(text, "case.yaml")
    assert len(problems) == 1
    assert problems[0].message.startswith("invalid YAML: ")
    assert problems[0].line == line
    assert problems[0].file == "case.yaml" and problems[0].path == ""
    assert doc.value is None


def test_unsafe_tags_are_invalid_yaml_not_code() -> None:
    _, problems = load("expect: !!python/object/apply:os.system ['true']\n")
    assert len(problems) == 1 and problems[0].message.startswith("invalid YAML: ")
    assert problems[0].line == 1


def test_tagged_values_load_as_python_objects_for_the_validators_to_refuse() -> None:
    doc, problems = load("""
        a: 2024-01-01
        b: !!set {x: null}
        c: !!binary aGVsbG8=
        d: .nan
        e: .inf
        f: 1e9
        """)
    assert problems == []
    value = doc.value
    assert value["a"] == datetime.date(2024, 1, 1)
    assert value["b"] == {"x"}
    assert value["c"] == b"hello"
    assert value["d"] != value["d"]
    assert value["e"] == float("inf")
    # YAML 1.1: an exponent without a dot and a sign is text.
    assert value["f"] == "1e9"


def test_recursive_alias_is_a_problem_not_a_crash() -> None:
    doc, problems = load("""
        targets:
          t:
            samples: &loop [{at: 1, expect: *loop}]
        """)
    assert [(p.path, p.line) for p in problems] == [("targets.t.samples[0].expect", 3)]
    assert "alias" in problems[0].message


def test_shared_aliases_are_expanded_per_use() -> None:
    doc, problems = load("""
        common: &c {mode: numeric, tolerance: 0.1}
        a: *c
        b: *c
        """)
    assert problems == []
    assert doc.value["a"] == doc.value["b"] == {"mode": "numeric", "tolerance": 0.1}
    assert doc.value["a"] is not doc.value["b"]


def test_alias_bombs_stop_at_the_value_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nine levels of ten-fold aliases would build 10**9 values.
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 10):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]")
    monkeypatch.setattr(yamlsource, "MAX_VALUES", 50_000)
    doc, problems = load_yaml_text("\n".join(lines) + "\n", "bomb.yaml")
    assert len(problems) == 1
    assert "more than 50,000 values" in problems[0].message
    assert doc.value is None


def test_value_limit_is_far_above_the_largest_legitimate_case() -> None:
    # 10,000 sample blocks of a few values each is the most a case may expand to.
    assert yamlsource.MAX_VALUES >= 10_000 * 10


def test_deep_nesting_is_a_located_problem_not_a_recursion_error() -> None:
    shallow = "a: " + "[" * 150 + "]" * 150 + "\n"
    assert load_yaml_text(shallow, "f.yaml")[1] == []
    for depth in (250, 1_000):
        deep = "a: 1\nb: " + "[" * depth + "]" * depth + "\n"
        _, problems = load_yaml_text(deep, "f.yaml")
        assert len(problems) == 1
        assert problems[0].message.startswith(
            "invalid YAML: collections are nested more than 200 levels deep at line 2, column 203\n")
        assert problems[0].line == 2


def test_nesting_built_up_through_aliases_is_limited_too() -> None:
    inner = "[" * 150 + "x" + "]" * 150
    outer = "[" * 150 + "*deep" + "]" * 150
    _, problems = load_yaml_text(f"a: &deep {inner}\nb: {outer}\n", "f.yaml")
    assert len(problems) == 1
    assert problems[0].message == "values are nested more than 200 levels deep"
    # Located where the aliased collection itself is written.
    assert problems[0].path.startswith("b[0][0]") and problems[0].line == 1


def test_load_yaml_file_reads_utf8(tmp_path: Path) -> None:
    path = tmp_path / "case.yaml"
    path.write_text("description: caf\u00e9 \u2615\n", encoding="utf-8")
    doc, problems = load_yaml_file(path)
    assert problems == [] and doc.value == {"description": "caf\u00e9 \u2615"}
    assert doc.file == str(path)


def test_load_yaml_file_reports_unreadable_files(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("description: caf\u00e9\n".encode("latin-1"))
    _, problems = load_yaml_file(latin1)
    assert [(p.file, p.message) for p in problems] == [(str(latin1), "file is not UTF-8 text")]
    missing = tmp_path / "missing.yaml"
    _, problems = load_yaml_file(missing)
    assert len(problems) == 1 and problems[0].message.startswith("cannot read file: ")
    _, problems = load_yaml_file(tmp_path)
    assert len(problems) == 1 and problems[0].message.startswith("cannot read file: ")


ROOT = Path(__file__).resolve().parent.parent


def _corpus() -> list[tuple[str, str]]:
    files = sorted(ROOT.glob("fixtures/**/*.yaml")) + sorted(ROOT.glob("tests/data/**/*.yaml"))
    texts = [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")) for path in files]
    many = "targets:\n" + "".join(
        f"  t{i}:\n    samples:\n" + "".join(
            f"      - at: [{j}.5, '{j}']\n        expect: {{a: {j}, b: [1, 2.5, null, yes], c: \"\\u00e9\"}}\n"
            for j in range(30))
        for i in range(5))
    texts.append(("generated", many))
    texts.append(("anchors", "a: &x {k: 1}\nb:\n  <<: *x\n  j: |\n    two\n    lines\n"))
    # Broken files: the problems must read the same whichever parser found them.
    texts.append(("unclosed", "a: [1, 2\nb: 3\n"))
    texts.append(("bad-indent", "a:\n  b: 1\n c: 2\n"))
    texts.append(("tab", "a:\n\tb: 1\n"))
    texts.append(("control-char", "a: \x01\n"))
    texts.append(("deep", "a: 1\nb: " + "[" * 300 + "]" * 300 + "\n"))
    texts.append(("duplicate", "a: 1\na: 2\n"))
    return texts


@pytest.mark.parametrize("name,text", _corpus(), ids=[name for name, _ in _corpus()])
def test_both_parsers_give_the_same_values_and_lines(name: str, text: str, loader: type) -> None:
    got = load_yaml_text(text, name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(yamlsource, "_Loader", yamlsource._PythonLoader)
        want = load_yaml_text(text, name)
    assert got == want


def test_libyaml_parses_when_pyyaml_has_it() -> None:
    import yaml

    assert (yamlsource._loader_class() is not yamlsource._PythonLoader) == bool(yaml.__with_libyaml__)


def test_control_characters_are_a_problem_not_an_exception() -> None:
    doc, problems = load("video: a.mp4\nlabel: \x01\n")
    assert doc.value is None and len(problems) == 1
    assert problems[0].message.startswith("invalid YAML: ") and "#x0001" in problems[0].message


def test_an_integer_too_long_for_python_is_a_located_problem() -> None:
    doc, problems = load_yaml_text("a: 1\nb: " + "9" * 5000 + "\n", "case.yaml")
    assert [(p.path, p.line) for p in problems] == [("b", 2)]
    assert "too many digits" in problems[0].message and doc.value == {"a": 1, "b": None}


def test_lone_surrogates_are_problems_in_values_and_keys() -> None:
    doc, problems = load_yaml_text('value: "\\ud800"\n"k\\udc80": 1\nok: "\\u00e9"\n', "case.yaml")
    assert [(p.path, p.line) for p in problems] == [("value", 1), ("", 2)]
    assert all("lone surrogate" in p.message for p in problems)
    assert doc.value == {"value": None, "ok": "é"}


def test_syntax_error_shows_line_column_the_line_and_a_caret() -> None:
    _doc, problems = load_yaml_text("video: a.mp4\ntargets:\n  a:\n    samples: [\n    - at: 1\n", "c.yaml")
    assert problems[0].line == 5
    assert problems[0].message == ("invalid YAML: expected the node content, but found '-' at line 5, column 5\n"
                                   "    5 |     - at: 1\n"
                                   "      |     ^")


def test_a_tab_in_indentation_says_yaml_indents_with_spaces() -> None:
    _doc, problems = load_yaml_text("video: a.mp4\ntargets:\n  a:\n\tsamples: []\n", "c.yaml")
    message = problems[0].message
    assert "at line 4, column 1" in message
    assert "YAML indents with spaces, not tabs" in message
    assert message.endswith("    4 |  samples: []\n      | ^")


def test_a_long_offending_line_is_cut_around_the_caret() -> None:
    import re

    text = "a: " + "x" * 200 + " : [\n"
    _doc, problems = load_yaml_text(text, "c.yaml")
    first, shown, caret = problems[0].message.splitlines()
    column = int(re.findall(r"column (\d+)", first)[0])
    assert len(shown) < 100 and shown.startswith("    1 | ...")
    assert shown[caret.index("^")] == text[column - 1]
