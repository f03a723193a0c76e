"""Tests under tests/integration/ are marked ``integration`` (they need the local cluster). Tests marked
``long``, ``scale`` or ``soak`` run only when the marker expression names them (``-m long``,
``-m "serial and scale"``): ``make test`` leaves them out, skipped with the reason."""

from __future__ import annotations

import os
import re

import pytest

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markexpr = str(config.getoption("markexpr") or "")
    for item in items:
        if "/tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
        for marker, what in OPT_IN_MARKERS.items():
            if item.get_closest_marker(marker) and not _selected(markexpr, marker):
                item.add_marker(pytest.mark.skip(reason=f"{what}: select it with -m {marker}"))
