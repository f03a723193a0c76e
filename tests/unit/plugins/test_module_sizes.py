"""The UI plugin keeps the project's size limits (modules 400 lines, classes 250, functions 80): a route
group grows in a module of its own, not in ``create_app``."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[3] / "airflow_kueue_provider" / "plugins"
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 400, 250, 80


def _oversized(path: Path) -> list[str]:
    source = path.read_text()
    name = path.relative_to(PLUGINS.parent)
    found = [f"{name}: {n} lines" for n in [len(source.splitlines())] if n > MODULE_LINES]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - start + 1
            limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
            if lines > limit:
                found.append(f"{name}:{node.lineno} {node.name}: {lines} lines (at most {limit})")
    return found


def test_no_module_class_or_function_of_the_plugin_is_over_its_limit() -> None:
    problems = [p for path in sorted(PLUGINS.rglob("*.py")) for p in _oversized(path)]
    assert not problems, "\n".join(problems)
