"""No shared module names a job kind: a kind's name appears (as a string or in an identifier) only in that
kind's own modules, so a new kind is its own files plus the registrations docs/design.md lists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[4] / "airflow_kueue_provider"

KIND_MODULES = {
    # the JobSet kind
    "kueue/kinds/jobset.py", "kueue/jobset.py", "kueue/jobset_result.py", "triggers/kueue_jobset.py",
    "operators/jobset.py",
    # the Job kind (its manifest's "kind: Job" and the user template's)
    "kueue/kinds/job.py", "kueue/spec/job_manifest.py", "kueue/spec/job_template_checks.py",
    "triggers/kueue_job.py",
    "operators/indexed_job.py", "operators/indexed_job_manifest.py",
}  # fmt: skip
REGISTRATIONS = {
    "kueue/names.py": "the one home of label keys (the JobSet controller's labels among them)",
    "get_provider_info.py": "the kinds' operator and trigger modules, for Airflow",
    "kueue/kinds/__init__.py": "imports the built-in kinds' description modules, which register them",
}
SPECIAL_CASES = {"worker"}  # the shard-side SDK knows no kinds; it is its own distribution
KIND_NAME = re.compile(r"jobset", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.add(id(node.value))
    return found


def _kind_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value in ("Job", "JobSet") or KIND_NAME.search(node.value):
                hits.append(f"{node.lineno}: {node.value[:40]!r}")
        elif isinstance(node, ast.Name) and KIND_NAME.search(node.id):
            hits.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and KIND_NAME.search(node.attr):
            hits.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.alias) and KIND_NAME.search(node.name):
            hits.append(f"{node.lineno}: import {node.name}")
    return hits


def test_no_shared_module_names_a_kind() -> None:
    named = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in KIND_MODULES or rel in REGISTRATIONS or rel.split("/")[0] in SPECIAL_CASES:
            continue
        if hits := _kind_names(path):
            named[rel] = hits
    assert named == {}, f"shared modules that name a kind (read it from kueue.kinds instead): {named}"


def test_the_scan_finds_a_kind_name() -> None:
    tmp = PACKAGE / "kueue" / "kinds" / "jobset.py"
    assert _kind_names(tmp), "the scan sees the JobSet kind's own module"
