"""The worker package (worker-package/) ships the provider's version and the worker's import closure."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import airflow_kueue_provider

REPO = Path(__file__).resolve().parents[2]
PACKAGE = tomllib.loads((REPO / "worker-package" / "pyproject.toml").read_text())
# hatchling's regex version source, its default pattern (hatchling/version/source/regex.py)
HATCH_DEFAULT_PATTERN = r"(?i)^(__version__|VERSION) *= *([\'\"])v?(?P<version>.+?)\2"


def test_its_version_is_the_providers() -> None:
    """Not written in worker-package/: hatchling reads it from the provider's ``__init__.py``."""
    assert "version" not in PACKAGE["project"]
    assert "version" in PACKAGE["project"]["dynamic"]
    version_source = PACKAGE["tool"]["hatch"]["version"]
    assert version_source.get("source", "regex") == "regex" and "pattern" not in version_source
    path = (REPO / "worker-package" / version_source["path"]).resolve()
    assert path == Path(airflow_kueue_provider.__file__).resolve()
    found = re.search(HATCH_DEFAULT_PATTERN, path.read_text(), flags=re.MULTILINE)
    assert found is not None and found["version"] == airflow_kueue_provider.__version__


def test_it_ships_every_package_the_worker_imports() -> None:
    shipped = {
        Path(target).parts[1]
        for target in PACKAGE["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"].values()
        if len(Path(target).parts) == 2
    }
    imported = set()
    for path in (REPO / "airflow_kueue_provider" / "worker").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
                imported.add(node.module.split(".")[0])
    assert imported <= shipped, f"the worker imports {sorted(imported - shipped)}, which the wheel lacks"
