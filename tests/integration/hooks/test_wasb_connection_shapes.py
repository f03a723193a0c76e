"""Each wasb connection shape Azurite can check authenticates for real: a write and a read back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.storage.blob import AccountSasPermissions, BlobServiceClient, ResourceTypes, generate_account_sas

from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from devcluster.layout import AZURITE_KEY

AZURITE = "http://127.0.0.1:10000/devstoreaccount1"
ACCOUNT = "devstoreaccount1"


def _sas() -> str:
    return generate_account_sas(
        ACCOUNT,
        AZURITE_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, list=True, create=True, add=True, delete=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )


SHAPES: dict[str, dict[str, Any]] = {
    "connection string": {"extra": {"connection_string": "from-env"}},
    "host + password (account key)": {"host": AZURITE, "password": AZURITE_KEY},
    "host + login + password": {"host": AZURITE, "login": ACCOUNT, "password": AZURITE_KEY},
    "shared_access_key extra": {"host": AZURITE, "extra": {"shared_access_key": AZURITE_KEY}},
    "account_key extra": {"host": AZURITE, "extra": {"account_key": AZURITE_KEY}},
    "sas token": {"host": AZURITE, "extra": {"sas_token": "from-sas"}},
}  # (a SAS given as an https URL: Azurite serves http only; the unit table covers that shape)


@pytest.fixture
def container(devcluster_env: dict[str, str]) -> Iterator[str]:
    name = f"shapes-{uuid.uuid4().hex[:10]}"
    service = BlobServiceClient.from_connection_string(devcluster_env["AZURE_STORAGE_CONNECTION_STRING"])
    service.create_container(name)
    yield name
    service.delete_container(name)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_connection_shape_authenticates_against_azurite(
    shape: str, container: str, devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = {"conn_type": "wasb", **json.loads(json.dumps(SHAPES[shape]))}
    extra = conn.get("extra", {})
    if extra.get("connection_string") == "from-env":
        extra["connection_string"] = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    if extra.get("sas_token") == "from-sas":
        extra["sas_token"] = _sas()
    monkeypatch.setenv("AIRFLOW_CONN_SHAPE_BLOB", json.dumps(conn))
    with BlobStoreHook("shape_blob", container, create_container=False) as hook:
        hook.check()
        hook.write_json("probe.json", {"shape": shape})
        assert hook.read_json("probe.json")[0] == {"shape": shape}
