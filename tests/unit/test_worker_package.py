"""The worker package (worker-package/) ships the provider's version and the worker's import closure, and
owns ``worker``, ``kueue`` and ``storage`` only, not ``airflow_kueue_provider/__init__.py`` (the provider's).
Without the provider ``airflow_kueue_provider`` is then a namespace package, so none of the three may need
the top-level ``__init__``."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import airflow_kueue_provider

REPO = Path(__file__).resolve().parents[2]
TOP = REPO / "airflow_kueue_provider"
PACKAGE = tomllib.loads((REPO / "worker-package" / "pyproject.toml").read_text())
WHEEL = PACKAGE["tool"]["hatch"]["build"]["targets"]["wheel"]
OWNED = set(WHEEL["hooks"]["custom"]["packages"])
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


def test_it_owns_the_three_packages_and_not_the_top_level_init() -> None:
    """The provider's ``__init__.py`` and ``py.typed`` belong to the provider alone (uninstalling one
    distribution must never delete a file of the other); the build hook copies whole packages only."""
    assert OWNED == set(airflow_kueue_provider.WORKER_PACKAGES) == {"worker", "kueue", "storage"}
    assert "force-include" not in WHEEL, "hatchling copies force-include into editable installs too"
    assert "dev-mode-dirs" not in WHEEL, "the repository root on every dev process's sys.path"
    hook = (REPO / "worker-package" / "hatch_build.py").read_text()
    assert 'f"airflow_kueue_provider/{package}"' in hook and "__init__" not in hook.split('"""', 2)[2]


def test_each_owned_package_is_typed() -> None:
    """PEP 561 for a namespace package's portions: each installed package carries its own ``py.typed``."""
    for package in OWNED:
        assert (TOP / package / "py.typed").is_file(), f"airflow_kueue_provider/{package}/py.typed"


def _imported(path: Path) -> set[str]:
    """The ``airflow_kueue_provider`` modules a file imports, relative imports resolved."""
    package = list(path.relative_to(REPO).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "airflow_kueue_provider"}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module.split(".")[0] == "airflow_kueue_provider":
                found |= (
                    {f"{module}.{a.name}" for a in node.names}
                    if module == "airflow_kueue_provider"
                    else {module}
                )
    return found


def test_the_owned_packages_import_only_each_other() -> None:
    """Not the top-level ``__init__`` (absent in a shard's image) nor a provider-only package."""
    outside = {
        f"{path.relative_to(REPO)}: {module}"
        for package in OWNED
        for path in (TOP / package).rglob("*.py")
        for module in _imported(path)
        if module.split(".")[1:2] == [] or module.split(".")[1] not in OWNED
    }
    assert not outside, sorted(outside)
