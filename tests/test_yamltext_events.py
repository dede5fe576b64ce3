"""Loading straight from parser events (yamltext._events) gives what the node path gives, value, lines and problems.

Each document is loaded both ways and the results compared by ``repr`` (so ``1``, ``1.0``
and ``True`` differ, and so does key order), on both parsers.
"""

from __future__ import annotations

import ast
import random
import textwrap
from pathlib import Path

import pytest
import yaml

from glasskit_eval.yamltext import _events
from glasskit_eval.yamltext import source as yamlsource
from glasskit_eval.yamltext.source import load_yaml_text

ROOT = Path(__file__).resolve().parent.parent
LOADERS = sorted({yamlsource._Loader, yamlsource._PythonLoader}, key=lambda cls: cls.__name__)

#: Plain scalars of every kind the resolver tells apart, and texts that are almost numbers.
SCALARS = [
    "0", "-0", "+0", "7", "-12", "+5", "017", "-017", "0o17", "0x1F", "-0x1f", "0b101", "1_000", "1:30", "190:20:30",
    "9" * 40, "1.0", "-1.5", "+2.5", "1.", "-0.0", ".5", "-.5", "1e5", "1.0e+5", "1.5E-3", "6.8523015e+5", "1_0.5",
    "1:30.5", ".inf", "-.Inf", "+.INF", ".nan", ".NaN", "0.1000000", "1.9000000", "3.14159265358979323846",
    "yes", "No", "ON", "off", "true", "False", "y", "n", "~", "null", "Null", "NULL", "", "2001-12-14",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "2002-13-45", "=", "x", "closed", "a b", "-", "caf\u00e9",
    "\u2615 tea", "0.1.2", "1,000", "12:", "+", "0x", "1e", "e5", "nan", "inf", "Yes please",
]
#: The same texts quoted and as block scalars: always strings, whatever they look like.
QUOTED = ["'1'", '"2.5"', "'yes'", '"~"', "''", '"caf\\u00e9"', '"\\t tab"', "'it''s'", '"line\\nbreak"', '"\\x41"']


EMPTY = '""'


def _dedented(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _strings_in_tests() -> list[tuple[str, str]]:
    """Multi-line string constants of the test modules that hold a `key: value` line: mostly case files."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value \
                    and ": " in node.value and len(node.value) < 20_000:
                found.setdefault(_dedented(node.value), f"{path.name}:{node.lineno}")
    return [(name, text) for text, name in found.items()]


def _files() -> list[tuple[str, str]]:
    paths = sorted({*ROOT.glob("fixtures/**/*.y*ml"), *ROOT.glob("tests/**/*.y*ml")})
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in paths if p.is_file()]


def _nested(depth: int, flow: bool) -> str:
    if flow:
        return "a: 1\nb: " + "[" * depth + "x" + "]" * depth + "\n"
    return "a: 1\nb:\n" + "".join("  " * level + f"k{level}:\n" for level in range(depth)) + "  " * depth + "v\n"


def _tricky() -> list[tuple[str, str]]:
    docs = {
        "empty": "", "comment only": "# nothing\n", "bare document": "---\n", "ended": "--- \n...\n",
        "two documents": "a: 1\n---\nb: 2\n", "a scalar": "just text\n", "a number": "12\n", "a list": "- 1\n- x\n",
        "flow in block": "a: {b: [1, {c: d}], e: []}\nf:\n  - {}\n  - [x, 'y', \"z\"]\n",
        "block in list": "- a: 1\n  b:\n    - 2\n    - c: 3\n-\n  - 4\n- ~\n",
        "multi-line": "a: first\n  second\n\n  third\nb: |\n  one\n   two\n\nc: >-\n  folded\n  here\nd: |+\n  kept\n\n",
        "quoted keys": "'a b': 1\n\"c\\u00e9\": 2\n'1': 3\n\"yes\": 4\n? long key\n: 5\n",
        "duplicate": "a: 1\nb: 2\na: 3\n", "nested duplicate": "a:\n  - {x: 1, x: 2}\n",
        "non-string keys": "1: a\nyes: b\n~: c\n1.5: d\n2001-01-01: e\n", "list key": "? [a, b]\n: c\n",
        "map key": "? {a: 1}\n: c\n", "merge": "a: &x {k: 1}\nb:\n  <<: *x\n  j: 2\n", "merge value": "a: <<\n",
        "value marker": "a: =\n", "anchor only": "a: &x 1\nb: 2\n", "alias": "a: &x [1]\nb: *x\n",
        "undefined alias": "a: *nope\n", "recursive": "a: &x [*x]\n", "tags": "a: !!str 1\nb: !!int '2'\nc: ! 3\n",
        "local tag": "a: !thing 1\n", "set": "a: !!set {x, y}\n", "binary": "a: !!binary aGk=\n",
        "comments": "# head\na: 1  # trailing\n# between\nb:   # after key\n  - 2 # item\n",
        "long int": "a: 1\nb: " + "9" * 5000 + "\n", "long int key": "9" * 5000 + ": 1\n",
        "surrogate": 'value: "\\ud800"\nok: 1\n', "surrogate key": '"k\\udc80": 1\n',
        "control char": "a: \x01\n", "tab": "a:\n\tb: 1\n", "unclosed": "a: [1, 2\nb: 3\n",
        "bad indent": "a:\n  b: 1\n c: 2\n", "bom": "\ufeffa: 1\n", "crlf": "a: 1\r\nb:\r\n  - x\r\n",
        "windows of events": "events:\n" + "".join(f"  - at: {i / 7:.7f}\n    expect: x\n" for i in range(50)),
        "scalars": "".join(f"k{i}: {s}\n" for i, s in enumerate(SCALARS)),
        "scalar items": "".join(f"- {s}\n" for s in SCALARS),
        "scalars in flow": "[" + ", ".join(s for s in SCALARS if s and s not in "-+") + "]\n",
        "quoted": "".join(f"q{i}: {s}\n" for i, s in enumerate(QUOTED)),
        "scalar keys": "".join(f"{s or EMPTY}: {i}\n" for i, s in enumerate(SCALARS) if s not in ("-", "=")),
    }
    for depth in (150, 197, 198, 199, 200, 201, 250):
        docs[f"flow nested {depth}"] = _nested(depth, flow=True)
        docs[f"block nested {depth}"] = _nested(depth, flow=False)
    return list(docs.items())


def _random_value(rng: random.Random, depth: int) -> object:
    roll = rng.random()
    if depth > 4 or roll < 0.5:
        return rng.choice(SCALARS + QUOTED)  # texts, written raw below
    if roll < 0.75:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = rng.sample(["a", "b", "c", "at", "expect", "1", "yes", "x y", "'q'"], rng.randrange(4))
    return {k: _random_value(rng, depth + 1) for k in keys}


def _render(value: object, indent: int, flow: bool) -> str:
    pad = "  " * indent
    if isinstance(value, str):
        return value if value not in ("", "-") or flow else "''"
    if isinstance(value, list):
        if flow or not value:
            return "[" + ", ".join(_render(v, 0, True) for v in value) + "]"
        return "".join(f"\n{pad}- " + _render(v, indent + 1, False) for v in value)
    assert isinstance(value, dict)
    if flow or not value:
        return "{" + ", ".join(f"{k}: " + _render(v, 0, True) for k, v in value.items()) + "}"
    return "".join(f"\n{pad}{k}: " + _render(v, indent + 1, False) for k, v in value.items())


def _generated(count: int) -> list[tuple[str, str]]:
    rng = random.Random(20261206)
    out = []
    for i in range(count):
        value = {"root": _random_value(rng, 0), "other": _random_value(rng, 0)}
        out.append((f"random {i}", _render(value, 0, rng.random() < 0.2).lstrip("\n") + "\n"))
    return out


CORPUS = _files() + _tricky() + _strings_in_tests() + _generated(300)


def _node_path(text: str) -> tuple[str, str, list[object]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(yamlsource, "_from_events", lambda text: None)
        doc, problems = load_yaml_text(text, "case.yaml")
    return repr(doc.value), repr(doc.lines), list(problems)


def _from_events(loader: type, text: str) -> bool:
    try:
        reader = loader(text)  # the pure-Python reader refuses control characters at once
    except yaml.YAMLError:
        return False
    return _events.values_and_lines(reader, yamlsource.MAX_NESTING, yamlsource.MAX_VALUES) is not None


@pytest.fixture(params=LOADERS, ids=lambda cls: cls.__name__)
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> type:
    monkeypatch.setattr(yamlsource, "_Loader", request.param)
    return request.param  # type: ignore[no-any-return]


def test_every_document_loads_from_events_as_from_nodes(loader: type) -> None:
    fast = 0
    for name, text in CORPUS:
        doc, problems = load_yaml_text(text, "case.yaml")
        assert (repr(doc.value), repr(doc.lines), problems) == _node_path(text), name
        fast += _from_events(loader, text)
    # Most of the corpus took the event path: the comparison above is not the node path twice.
    assert fast > len(CORPUS) // 2


def test_plain_documents_take_the_event_path_and_the_others_the_node_path(loader: type) -> None:
    tricky = dict(_tricky())
    for name in ("empty", "comment only", "bare document", "a scalar", "a list", "flow in block", "multi-line",
                 "quoted keys", "comments", "crlf", "windows of events", "quoted", "flow nested 197"):
        assert _from_events(loader, tricky[name]), name
    for name in ("duplicate", "nested duplicate", "non-string keys", "list key", "merge", "alias", "anchor only",
                 "tags", "long int", "surrogate", "surrogate key", "two documents", "unclosed", "flow nested 201",
                 "block nested 250", "value marker", "set"):
        assert not _from_events(loader, tricky[name]), name


def test_the_value_limit_reads_the_same_from_events(monkeypatch: pytest.MonkeyPatch, loader: type) -> None:
    text = "events:\n" + "".join(f"  - at: {i}\n    expect: x\n" for i in range(40))
    monkeypatch.setattr(yamlsource, "MAX_VALUES", 50)
    doc, problems = load_yaml_text(text, "case.yaml")
    assert doc.value is None and ["more than 50 values" in p.message for p in problems] == [True]
    assert (repr(doc.value), repr(doc.lines), problems) == _node_path(text)
    monkeypatch.setattr(yamlsource, "MAX_VALUES", 200)
    doc, problems = load_yaml_text(text, "case.yaml")
    assert problems == [] and len(doc.value["events"]) == 40 and doc.lines[("events", 39, "expect")] == 81
