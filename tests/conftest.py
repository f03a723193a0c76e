"""Tests under tests/integration/ are marked ``integration`` (they need the local cluster). Tests marked
``long``, ``scale`` or ``soak`` run only when the marker expression names them (``-m long``,
``-m "serial and scale"``): ``make test`` leaves them out, skipped with the reason. Under pytest-xdist the
longest modules run first (``tests/module_seconds.json``)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check what holds, not how fast: Hypothesis' 200 ms deadline per example failed an IndexSet
# property in the niced lowest-versions lane while the bed's serial pass ran beside it (260 ms once, 0.06 ms
# on the rerun). Speed is the benchmarks' business (benchmarks/).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# The identity seal's key is derived from it when [kueue] identity_key is unset (hooks/identity_key.py). An
# `airflow` command in a fresh AIRFLOW_HOME writes a random one into its airflow.cfg: pytest and the Airflow
# processes it starts must share one (a valid Fernet key, not a secret).
os.environ.setdefault("AIRFLOW__CORE__FERNET_KEY", "YWlyZmxvdy1rdWV1ZS1wcm92aWRlci10ZXN0LWtleSE=")

OPT_IN_MARKERS = {
    "long": "the long variant of a stress test",
    "scale": "a full-size run (minutes to an hour; figures in benchmarks/results/full_scale.md)",
    "soak": "the long fault soak (an hour of faults; figures in benchmarks/results/fault_soak.md)",
}


def _selected(markexpr: str, marker: str) -> bool:
    """``marker`` appears in the ``-m`` expression other than as ``not marker``."""
    return re.search(rf"(?<!not )\b{marker}\b", markexpr) is not None


REPO = Path(__file__).resolve().parents[1]
MODULE_SECONDS = REPO / "tests" / "module_seconds.json"
DEFAULT_SECONDS = {"tests/integration/": 60.0, "tests/unit/": 0.0}
"""A module missing from ``module_seconds.json`` (``tools/test_durations.py`` writes it): a new bed module
is likely long, so it starts early; a unit module is not."""


def longest_modules_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """``items`` with each module's tests together, in their order, the modules longest first (ties in
    collection order): under pytest-xdist a long module that starts last is the pass's tail, the other
    workers idle."""

    def module(item: pytest.Item) -> str:
        return item.path.relative_to(REPO).as_posix() if item.path.is_relative_to(REPO) else str(item.path)

    def length(name: str) -> float:
        found = seconds.get(name)
        if found is not None:
            return float(found)
        return next((s for prefix, s in DEFAULT_SECONDS.items() if name.startswith(prefix)), 0.0)

    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(module(item), len(first_seen))
    order = {name: (-length(name), at) for name, at in first_seen.items()}
    return sorted(items, key=lambda item: order[module(item)])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and MODULE_SECONDS.exists():
        # Only under xdist (every worker reads the same file, so all collect the same order); a run on one
        # process keeps the collection order (the serial pass: test_zz_process_lifecycle stops the cluster).
        items[:] = longest_modules_first(items, json.loads(MODULE_SECONDS.read_text()))
    markexpr = str(config.getoption("markexpr") or "")
    for item in items:
        if "/tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
        for marker, what in OPT_IN_MARKERS.items():
            if item.get_closest_marker(marker) and not _selected(markexpr, marker):
                item.add_marker(pytest.mark.skip(reason=f"{what}: select it with -m {marker}"))
