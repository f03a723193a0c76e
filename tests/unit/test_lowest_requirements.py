"""make test-min-airflow installs each direct dependency at its floor (tools/lowest_requirements.py)."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "lowest_requirements.py"
PYPROJECT = TOOL.parents[1] / "pyproject.toml"
spec = importlib.util.spec_from_file_location("lowest_requirements", TOOL)
assert spec and spec.loader
lowest_requirements = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lowest_requirements)


def test_each_floor_becomes_a_pin_of_that_release_line() -> None:
    assert lowest_requirements.lowest(["kubernetes>=32", "azure-identity>=1.17", "apache-airflow>=3.1"]) == [
        "kubernetes==32.*",
        "azure-identity==1.17.*",
        "apache-airflow==3.1.*",
    ]


def test_a_dependency_without_a_floor_is_refused() -> None:
    with pytest.raises(ValueError, match="give each direct dependency a floor"):
        lowest_requirements.lowest(["kubernetes"])


def test_the_providers_own_dependencies_all_have_floors() -> None:
    """Its own list, ``[tool.airflow-kueue-provider] dependencies`` ([project]'s are dynamic: setup.py adds
    the worker package's exact pin, which has no floor to test)."""
    own = tomllib.loads(PYPROJECT.read_text())["tool"]["airflow-kueue-provider"]["dependencies"]
    assert len(lowest_requirements.lowest(own)) == len(own) > 0
