"""The Blob hook's test_connection (Airflow's Test button) against Azurite: it succeeds on a good connection
(kueue_blob and the old wasb shape), and fails naming the cause (credentials, missing container, unreachable)
without a secret, creating nothing."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from airflow.models.connection import Connection
from azure.storage.blob import BlobServiceClient, ContainerSasPermissions, generate_container_sas

from airflow_kueue_provider.hooks.blob_store import BlobStoreHook, RetryPolicy
from airflow_kueue_provider.storage.blob_store_base import DEFAULT_CONTAINER

AZURITE = "http://127.0.0.1:10000/devstoreaccount1"
ACCOUNT = "devstoreaccount1"
FAST = RetryPolicy(attempts=2, base_delay=0.05, max_delay=0.1, request_timeout=2.0)


def _key(cs: str) -> str:
    return dict(p.partition("=")[::2] for p in cs.split(";") if p)["AccountKey"]


@pytest.fixture
def cs(devcluster_env: dict[str, str]) -> str:
    return devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]


@pytest.fixture
def container(cs: str) -> Iterator[str]:
    name = f"tc-{uuid.uuid4().hex[:12]}"
    service = BlobServiceClient.from_connection_string(cs)
    service.create_container(name)
    yield name
    service.delete_container(name)


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
    return conn_id


@pytest.mark.parametrize("conn_type", ["kueue_blob", "wasb"])
def test_a_good_connection_passes(
    conn_type: str, cs: str, container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn_id = _conn(monkeypatch, "tc_good", conn_type=conn_type, extra={"connection_string": cs})
    ok, message = BlobStoreHook(conn_id, container).test_connection()
    assert ok, message
    assert container in message and _key(cs) not in message


def test_airflows_test_button_reaches_the_hook(cs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the API server's /connections/test runs: the connection's hook from its type, test_connection.
    The hook's default container (airflow-kueue) exists on the bed or not: either way the answer names it."""
    extra = json.dumps({"connection_string": cs})
    conn = Connection(conn_id="tc_button", conn_type="kueue_blob", extra=extra)
    _conn(monkeypatch, "tc_button", conn_type="kueue_blob", extra={"connection_string": cs})
    ok, message = conn.test_connection()  # type: ignore[no-untyped-call]
    exists = BlobServiceClient.from_connection_string(cs).get_container_client(DEFAULT_CONTAINER).exists()
    assert ok is exists, message
    assert DEFAULT_CONTAINER in message and _key(cs) not in message


def test_a_wrong_key_fails_naming_the_credentials_not_the_key(
    cs: str, container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = base64.b64encode(b"not the devstoreaccount1 key, 64 bytes long..............").decode()
    bad = cs.replace(_key(cs), wrong)
    conn_id = _conn(monkeypatch, "tc_bad_key", conn_type="kueue_blob", extra={"connection_string": bad})
    ok, message = BlobStoreHook(conn_id, container).test_connection()
    assert not ok and "authentication/authorization" in message and "account key" in message
    assert wrong not in message and _key(cs) not in message


def test_a_missing_container_fails_and_is_not_created(cs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = f"tc-missing-{uuid.uuid4().hex[:8]}"
    conn_id = _conn(monkeypatch, "tc_missing", conn_type="kueue_blob", extra={"connection_string": cs})
    ok, message = BlobStoreHook(conn_id, missing).test_connection()  # create_container=True by default
    assert not ok and f"container {missing!r} does not exist" in message, message
    assert not BlobServiceClient.from_connection_string(cs).get_container_client(missing).exists()


def test_an_unreachable_account_fails_saying_so_within_the_budget(
    cs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn_id = _conn(
        monkeypatch,
        "tc_down",
        conn_type="kueue_blob",
        host="http://127.0.0.1:1/devstoreaccount1",
        login="devstoreaccount1",
        password=_key(cs),
    )
    started = time.monotonic()
    ok, message = BlobStoreHook(conn_id, "anything", retry=FAST).test_connection()
    assert not ok and message.startswith("unreachable:") and "127.0.0.1:1" in message, message
    assert _key(cs) not in message and time.monotonic() - started < 10


def test_a_sas_connection_is_tested_by_listing_one_blob(
    cs: str, container: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sas = generate_container_sas(
        ACCOUNT, container, account_key=_key(cs), permission=ContainerSasPermissions(read=True, list=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    conn_id = _conn(monkeypatch, "tc_sas", conn_type="kueue_blob", host=AZURITE, extra={"sas_token": sas})
    ok, message = BlobStoreHook(conn_id, container).test_connection()
    assert ok, message
    assert sas not in message
