"""The package as a whole: its public surface for adapter authors and an import graph without cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import glasskit_eval

PACKAGE = Path(glasskit_eval.__file__).parent


def test_public_surface_is_pinned() -> None:
    assert glasskit_eval.__all__ == ["BatchEvaluator", "FactoryConfig", "Sample", "SampleEvaluator", "Target",
                                     "TransientError", "__version__"]
    from glasskit_eval.adapters import base

    for name in glasskit_eval.__all__[:-1]:
        assert getattr(glasskit_eval, name) is getattr(base, name)


def test_the_adapter_surface_imports_neither_av_nor_pil() -> None:
    code = ("import sys\nfrom glasskit_eval import FactoryConfig, Sample, SampleEvaluator, Target\n"
            "print(sorted(m for m in ('av', 'PIL', 'yaml', 'asyncio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout
    assert out.strip() == "[]"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Modules of the package this file imports (outside ``if TYPE_CHECKING:`` blocks)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    known = {_module(p) for p in PACKAGE.rglob("*.py")}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0 or id(node) in skip:
            continue
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
        names = [f"{target}.{a.name}" for a in node.names]
        found.update(n for n in names if n in known)
        if target in known and not any(n in known for n in names):
            found.add(target)
    found.discard(module)
    return found


def test_no_import_cycles() -> None:
    graph = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}
    # A package's __init__ importing its own modules is not a cycle of concern; ours are empty anyway.
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep):], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


def test_subpackage_inits_import_nothing() -> None:
    # `--help` imports the package; anything in these would be paid on every start. The command
    # line's face is the one package whose __init__ is code (it is what `--help` runs).
    for init in PACKAGE.glob("*/__init__.py"):
        if init.parent.name == "cli":
            continue
        code = [line for line in init.read_text().splitlines() if line.strip() and not line.startswith("#")]
        assert not any(line.startswith(("import", "from")) for line in code if "__future__" not in line), init
