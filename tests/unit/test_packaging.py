"""The distribution's metadata tells the truth: one version (``airflow_kueue_provider.__version__``) for the
wheel, the worker wheel, the provider's pin of the worker and the provider info; ``py.typed`` shipped; no
development tool among the users' extras; without the worker package, the first import names the fix.
(``tools/check_dist.py``, ``make dist``, builds both wheels and checks the same on what it built.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

import airflow_kueue_provider
from airflow_kueue_provider.get_provider_info import get_provider_info
from tests.tool_modules import load_tool

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def test_the_version_is_written_once_in_the_package() -> None:
    assert "version" not in PROJECT, "pyproject.toml must not repeat the version: it reads __version__"
    assert "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "airflow_kueue_provider.__version__"
    }
    Version(airflow_kueue_provider.__version__)  # PEP 440, or InvalidVersion


def test_setuptools_reads_the_same_version_without_importing_the_package() -> None:
    """What the build puts into the metadata: setuptools evaluates the attr statically (the package's
    ``__init__`` must keep ``__version__`` a literal), the way ``python -m build`` does."""
    expand = pytest.importorskip("setuptools.config.expand")
    assert expand.read_attr("airflow_kueue_provider.__version__", root_dir=REPO) == (
        airflow_kueue_provider.__version__
    )
    source = (REPO / "airflow_kueue_provider" / "__init__.py").read_text()
    assert re.search(r'^__version__ = "[^"]+"$', source, flags=re.MULTILINE)


def test_the_provider_info_reports_the_same_version() -> None:
    assert get_provider_info()["versions"][0] == airflow_kueue_provider.__version__


def test_the_installed_metadata_agrees_when_installed_from_this_tree() -> None:
    """The venv's editable install (``make venv``: reinstalled when ``__init__.py`` changes) has the metadata
    a build of this tree would write. Skipped where the metadata found is not an install of this tree."""
    try:
        dist = metadata.distribution("airflow-kueue-provider")
    except metadata.PackageNotFoundError:
        pytest.skip("airflow-kueue-provider is not installed")
    source = json.loads(dist.read_text("direct_url.json") or "{}").get("url")
    if source != REPO.as_uri():
        pytest.skip(f"the metadata found ({dist.locate_file('')}) is not an install of {REPO} ({source})")
    assert dist.version == airflow_kueue_provider.__version__, (
        "a stale install: make venv, or pip install -e ."
    )


def test_py_typed_ships_in_the_wheel() -> None:
    assert (REPO / "airflow_kueue_provider" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["airflow_kueue_provider"]


def test_development_tools_are_not_a_user_extra() -> None:
    """pytest, ruff, mypy, playwright... are a PEP 735 dependency group (``pip install --group dev``), which
    is not part of the published metadata, rather than an extra users would see."""
    extras = PROJECT.get("optional-dependencies", {})
    assert "dev" not in extras
    tools = {
        re.split(r"[\[<>=~;\s]", requirement, maxsplit=1)[0]
        for requirement in PYPROJECT["dependency-groups"]["dev"]
        if isinstance(requirement, str)
    }
    assert {"pytest", "ruff", "mypy"} <= tools


def test_the_provider_requires_the_worker_package_at_its_own_version() -> None:
    """``[project]`` cannot say "my own version": the dependencies are dynamic, setup.py adds the pin to the
    provider's own list, reading the version where it is written (no second copy of it)."""
    assert "dependencies" not in PROJECT and "dependencies" in PROJECT["dynamic"]
    setup = load_tool("../setup")
    own = PYPROJECT["tool"]["airflow-kueue-provider"]["dependencies"]
    assert setup.dependencies() == [
        *own,
        f"airflow-kueue-provider-worker=={airflow_kueue_provider.__version__}",
    ]
    assert not [r for r in own if r.lower().startswith("airflow-kueue-provider")]


def test_the_wheel_leaves_the_worker_packages_to_the_worker_package() -> None:
    excluded = set(PYPROJECT["tool"]["setuptools"]["packages"]["find"]["exclude"])
    for package in airflow_kueue_provider.WORKER_PACKAGES:
        assert {f"airflow_kueue_provider.{package}", f"airflow_kueue_provider.{package}.*"} <= excluded


def test_without_the_worker_package_the_import_names_the_fix(tmp_path: Path) -> None:
    """The provider's own files alone (what uninstalling the worker package leaves): the first import fails
    with the command that fixes it, not a ModuleNotFoundError from deep inside a hook. (-S: no site, so no
    editable install's finder supplies the tree's packages.)"""
    shutil.copytree(REPO / "airflow_kueue_provider", tmp_path / "airflow_kueue_provider")
    for package in airflow_kueue_provider.WORKER_PACKAGES:
        shutil.rmtree(tmp_path / "airflow_kueue_provider" / package)
    code = "import airflow_kueue_provider.operators.indexed_job"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); {code}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    version = airflow_kueue_provider.__version__
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"airflow_kueue_provider.WorkerPackageMissing: airflow-kueue-provider {version} needs "
        f"airflow-kueue-provider-worker {version}, which installs airflow_kueue_provider.worker, "
        f"airflow_kueue_provider.kueue, airflow_kueue_provider.storage: pip install "
        f"airflow-kueue-provider-worker=={version} "
        "(from a clone of the repository: pip install ./worker-package)"
    )
