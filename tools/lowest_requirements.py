#!/usr/bin/env python
"""Print the provider's direct dependencies pinned to their floors (``name>=X.Y`` -> ``name==X.Y.*``), one a
line: what ``make test-min-airflow`` installs, so the lowest versions pyproject.toml allows are tested."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def lowest(requirements: list[str]) -> list[str]:
    pins = []
    for requirement in requirements:
        found = re.fullmatch(
            r"([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][0-9.]*)", requirement.split(";")[0].strip()
        )
        if found is None:
            raise ValueError(f"{requirement!r}: give each direct dependency a floor, as name>=X.Y")
        pins.append(f"{found[1]}=={found[2]}.*")
    return pins


def main() -> int:
    own = tomllib.loads(PYPROJECT.read_text())["tool"]["airflow-kueue-provider"]  # [project]'s are dynamic
    print("\n".join(lowest(own["dependencies"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
