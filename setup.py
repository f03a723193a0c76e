"""The provider's dependencies, which ``[project]`` cannot state: its own (``[tool.airflow-kueue-provider]``
in pyproject.toml) plus the worker package at exactly the provider's version, read from
``airflow_kueue_provider/__init__.py`` (the version's one home) without importing it. Everything else about
the distribution is in pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
WORKER_DIST = "airflow-kueue-provider-worker"


def package_version(root: Path = ROOT) -> str:
    source = (root / "airflow_kueue_provider" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', source, flags=re.MULTILINE)
    if found is None:
        raise SystemExit('airflow_kueue_provider/__init__.py has no __version__ = "..." line')
    return found[1]


def dependencies(root: Path = ROOT) -> list[str]:
    own = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["airflow-kueue-provider"]
    return [*own["dependencies"], f"{WORKER_DIST}=={package_version(root)}"]


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it for dependencies()
    from setuptools import setup

    setup(install_requires=dependencies())
