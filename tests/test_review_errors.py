"""review/errors: one error tree for the review server, and no import cycle inside review/."""

from __future__ import annotations

import ast
from pathlib import Path

import glasskit_eval.review as review_package
from glasskit_eval.review.errors import ApiError, Denied, NotFound, ReviewError

REVIEW = Path(review_package.__file__).parent


def test_the_tree() -> None:
    assert issubclass(Denied, ReviewError) and issubclass(ApiError, ReviewError)
    assert issubclass(NotFound, ApiError) and not issubclass(Denied, ApiError)
    error = ApiError(409, "conflict", "changed on disk", revision="abc")
    assert (error.status, error.code, error.message, error.extra) == (409, "conflict", "changed on disk",
                                                                      {"revision": "abc"})
    assert str(error) == "changed on disk"
    missing = NotFound("no case 'x'")
    assert (missing.status, missing.code, missing.extra) == (404, "not_found", {})


def _review_imports() -> dict[str, set[str]]:
    """Modules of review/ each module imports, lazy (function-level) imports included."""
    graph: dict[str, set[str]] = {}
    for path in REVIEW.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        graph[path.stem] = deps
    return graph


def test_no_import_cycle_inside_review() -> None:
    graph = _review_imports()
    assert "errors" in graph and graph["errors"] == set()

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, ()))
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo.extend(graph.get(module, ()))
        return seen

    cycles = sorted(m for m in graph if m in reachable(m))
    assert cycles == []
    assert "api" not in graph["edits"]
