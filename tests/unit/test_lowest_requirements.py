"""make test-min-airflow installs each direct dependency at its floor (tools/lowest_requirements.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "lowest_requirements.py"
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
    assert lowest_requirements.main() == 0
