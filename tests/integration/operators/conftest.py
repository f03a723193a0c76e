"""Fixtures shared by the operator tests: a Blob container on Azurite and its Airflow connection."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger

from ..airflow_runner import AirflowHome
from ..cluster import short_id

CONN_ID = "kueue_blob_test"


@pytest.fixture
def blob(devcluster_env: dict[str, str], airflow_home: AirflowHome) -> Iterator[SimpleNamespace]:
    """A fresh container and an Airflow connection to Azurite (wasb-style, connection string)."""
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    conn = json.dumps({"conn_type": "wasb", "extra": {"connection_string": conn_string}})
    key = f"AIRFLOW_CONN_{CONN_ID.upper()}"
    os.environ[key] = conn
    airflow_home.env[key] = conn
    container = f"ckpt-{short_id()}"
    service = BlobServiceClient.from_connection_string(conn_string)
    yield SimpleNamespace(conn_string=conn_string, container=container, service=service)
    for made in service.list_containers(name_starts_with=container):  # the base and its shard containers
        with contextlib.suppress(Exception):
            service.delete_container(made.name)


def read_ledger(blob: SimpleNamespace, prefix: str) -> RunLedger:
    data = blob.service.get_blob_client(blob.container, f"{prefix}/ledger.json").download_blob().readall()
    return RunLedger.from_dict(json.loads(data))
