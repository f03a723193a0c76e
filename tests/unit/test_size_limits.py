"""The size limits hold in every module of the package: modules of at most 400 lines, classes of at most
250, functions of at most 80 -- a reader holds one concern at a time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_kueue_provider"
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 400, 250, 80


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def oversized(source: str) -> list[str]:
    """What in ``source`` passes a limit, as ``"<what> <name>: <lines> lines (limit)"``."""
    found = []
    if (lines := len(source.splitlines())) > MODULE_LINES:
        found.append(f"module: {lines} lines (at most {MODULE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > limit:
                found.append(f"{type(node).__name__} {node.name}: {size} lines (at most {limit})")
    return found


def test_the_check_sees_a_long_function() -> None:
    body = "".join(f"    x = {i}\n" for i in range(FUNCTION_LINES))
    assert oversized(f"def long():\n{body}") == ["FunctionDef long: 81 lines (at most 80)"]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_every_module_holds_the_size_limits(path: Path) -> None:
    assert oversized(path.read_text()) == [], f"split {path.relative_to(PACKAGE)} by concern"
