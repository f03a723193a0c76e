"""The distribution's metadata tells the truth: one version (``airflow_kueue_provider.__version__``) for the
wheel, the worker wheel and the provider info; ``py.typed`` shipped; no development tool among the users'
extras. (``tools/check_dist.py``, ``make dist``, builds both wheels and checks the same on what it built.)"""

from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

import airflow_kueue_provider
from airflow_kueue_provider.get_provider_info import get_provider_info

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
