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


def test_the_provider_info_is_valid_for_airflow() -> None:
    """Airflow's own schema: a typed option or a connection-types entry it refuses would drop the provider."""
    import jsonschema
    from airflow import providers_manager

    schema = providers_manager._read_schema_from_resources_or_local_file("provider_info.schema.json")
    jsonschema.validate(get_provider_info(), schema)


def test_the_options_are_typed_and_the_blob_connection_type_is_registered() -> None:
    info = get_provider_info()
    types = {key: option["type"] for key, option in info["config"]["kueue"]["options"].items()}
    assert types["allow_privileged_pods"] == "boolean" and types["ui_reads_total"] == "integer"
    assert types["allowed_local_queues"] == "string" and types["default_queue_name"] == "string"
    assert [entry["connection-type"] for entry in info["connection-types"]] == ["kueue_blob"]
