"""The package's rooms: no import cycle between subpackages, no arrow back up, one place results are made.

Imports are read with ``ast``, in-function and ``TYPE_CHECKING`` ones included: a cycle that only
lazy imports hide is still a cycle for a reader.
"""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

import glasskit_eval
from glasskit_eval.results import SampleResult

PACKAGE = Path(glasskit_eval.__file__).parent

#: Rooms from the top floor down; a room may import only rooms below it. The package itself is the
#: adapter authors' door (it re-exports ``adapters.base``); ``__version__`` is everyone's.
FLOORS = [
    ["__main__", "__init__"],
    ["cli"],
    ["commands"],
    ["review", "dist"],
    ["evaluation"],
    ["reports", "checkpoints"],
    ["plan"],
    ["cases", "store", "adapters", "video", "arms", "labels"],
    ["summary", "protocol_server"],
    ["results", "compare", "yamltext", "statistics"],
    ["support", "errors"],
]


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _room(module: str) -> str:
    return module.split(".")[0]


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing room, imported room) -> the imports that make the arrow."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
        if path.name == "__init__.py" and module == "__init__":
            package = []
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = package[: len(package) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
            for name in [target or "__init__"]:
                a, b = _room(module), _room(name)
                if a != b:
                    edges.setdefault((a, b), []).append(f"{module} -> {name}")
    return edges


def test_no_import_cycle_between_subpackages() -> None:
    edges = _edges()
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    # Tarjan's strongly connected components: every component of more than one room is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    detail = {f"{a}->{b}": why[:3] for (a, b), why in edges.items()
              if any(a in c and b in c for c in cycles)}
    assert cycles == [], detail


def test_no_room_imports_a_room_above_it() -> None:
    floor = {room: n for n, rooms in enumerate(FLOORS) for room in rooms}
    rooms = {_room(_module(p)) for p in PACKAGE.rglob("*.py")}
    assert rooms <= set(floor), f"rooms without a floor: {sorted(rooms - set(floor))}"
    upward = {f"{a} -> {b}": why[:3] for (a, b), why in _edges().items()
              if floor[b] < floor[a] and b != "__init__"}
    assert upward == {}


def _sign(room: Path) -> str:
    return ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""


def _names_in(room: Path) -> list[str]:
    """The modules and subpackages of a room (``__init__`` aside)."""
    return sorted([p.stem for p in room.glob("*.py") if p.name != "__init__.py"]
                  + [d.name for d in room.iterdir() if (d / "__init__.py").exists()])


def _named(doc: str, name: str) -> bool:
    # A sign names a module in double backticks, alone (``trials``) or with what it holds (``effective.x``).
    return re.search(rf"``{re.escape(name)}(``|\.)", doc) is not None


def test_every_room_has_a_sign() -> None:
    # h11's two rules at the package level: what lives here, and what it may not know.
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 12, f"{init} needs a docstring saying what lives there"


@pytest.mark.parametrize("room", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")))
def test_every_room_s_sign_names_every_module_in_it(room: str) -> None:
    doc = _sign(PACKAGE / room)
    missing = [name for name in _names_in(PACKAGE / room) if not _named(doc, name)]
    assert missing == [], (f"{room}/__init__.py's sign does not name {', '.join(missing)}: say in it what each "
                           "module holds, as ``name``")


def _doors(room: str) -> set[str]:
    """The modules a sign's ``Doors`` paragraph names."""
    paragraph = next((p for p in _sign(PACKAGE / room).split("\n\n") if p.startswith("Doors")), "")
    return set(re.findall(r"``(\w+)``", paragraph))


def test_the_engine_is_entered_only_by_the_doors_its_sign_lists() -> None:
    doors = _doors("evaluation")
    assert doors and doors <= set(_names_in(PACKAGE / "evaluation"))
    entered: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        if _room(module) == "evaluation":
            continue
        package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            target = [*package[: len(package) - (node.level - 1)], *(node.module.split(".") if node.module else [])]
            names = [target[1]] if len(target) > 1 else [a.name for a in node.names]
            if target[:1] == ["evaluation"]:
                for name in names:
                    entered.setdefault(name, []).append(module)
    back_rooms = {name: sorted(set(by)) for name, by in entered.items() if name not in doors}
    assert back_rooms == {}, "these engine modules are used from outside but not listed as doors in its sign"


#: Fields only a SampleResult has: a ``replace`` setting one of them re-stamps a result.
RESULT_ONLY_FIELDS = {f.name for f in fields(SampleResult)} - {"case", "target"}


def test_results_are_made_in_one_place() -> None:
    makers = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        tree = ast.parse(text)
        knows_results = "SampleResult" in text
        # Fields of the module's own records: a `replace` of one of those is not a result's.
        own = {node.target.id for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
               for node in cls.body if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SampleResult":
                    makers.append(f"{_module(path)}.{function.name}")
                # A result is never re-stamped after it is made.
                if (knows_results and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "replace" and {k.arg for k in node.keywords} & RESULT_ONLY_FIELDS - own):
                    makers.append(f"{_module(path)}.{function.name} (replace)")
    assert sorted(makers) == ["evaluation._judge.make_result"]


def test_modules_stay_small() -> None:
    # The copy-alone server users vendor into their app is the one exception.
    big = {_module(p): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 500 and p.name != "protocol_server.py"}
    assert big == {}
    # ... and it stays under 700 lines, a file one can read through before copying it.
    assert len((PACKAGE / "protocol_server.py").read_text().splitlines()) < 700
