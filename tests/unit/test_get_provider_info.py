"""The provider is found by Airflow through its entry point, and every module it lists imports."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from airflow_kueue_provider.get_provider_info import get_provider_info


def test_entry_point_is_registered() -> None:
    eps = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_kueue")]
    assert len(eps) == 1 and eps[0].load()()["package-name"] == "airflow-kueue-provider"


def test_every_listed_module_imports() -> None:
    info = get_provider_info()
    for section in ("operators", "hooks", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
