"""The long description a package index shows is README.md without links it could not resolve, and current."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

import long_description  # noqa: E402


def test_the_package_reads_the_generated_long_description_and_it_is_current() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.pypi.md"
    assert long_description.main(["--check"]) == 0, "run python tools/long_description.py"


def test_it_has_no_relative_link_or_image_and_keeps_absolute_ones() -> None:
    assert long_description.relative_links((REPO / "README.pypi.md").read_text()) == []
    made = long_description.long_description(
        "See [AKS](docs/aks.md#steps), [the DAG](#your-first-dag), [`docs/x.md`](docs/x.md) and "
        "[Kueue](https://kueue.sigs.k8s.io/).\n![shot](docs/screenshots/a.png)\nend\n"
    )
    body = made.split("\n", 2)[2]
    assert body == (
        "See AKS (`docs/aks.md` in the source), the DAG, `docs/x.md` and [Kueue](https://kueue.sigs.k8s.io/).\n"
        "end\n"
    )
