"""The pod SAS as the azure SDK signs it: https-only for an https account (every kind of SAS), http allowed
only for an http endpoint (Azurite); the user-delegation branch (Azurite cannot sign one: it needs OAuth)
checked over ``generate_container_sas``'s real output with a delegation key the test hands it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import pytest
from azure.storage.blob import UserDelegationKey

from airflow_kueue_provider.hooks.blob_containers import BlobAccountHook, sas_protocol

START = datetime(2030, 1, 1, tzinfo=UTC)
EXPIRY = START + timedelta(hours=1)
KEY = "a2V5a2V5a2V5a2V5"


def _fields(token: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(token).items()}


def _hook(monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any]) -> BlobAccountHook:
    monkeypatch.setenv("AIRFLOW_CONN_SAS_BLOB", json.dumps({"conn_type": "wasb", **conn}))
    hook = BlobAccountHook("sas_blob", "ckpt", create_container=False)
    monkeypatch.setattr(hook, "grant_access", lambda *args: None)  # no Blob call: the token is the point
    return hook


@pytest.mark.parametrize(
    "conn",
    [
        {"login": "acct", "password": KEY},
        {"extra": {"connection_string": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY}"}},
    ],
)
@pytest.mark.parametrize("policy_id", [None, "p1"])
def test_an_account_key_sas_for_an_https_account_is_https_only(
    monkeypatch: pytest.MonkeyPatch, conn: dict[str, Any], policy_id: str | None
) -> None:
    token = _hook(monkeypatch, conn).container_sas("ckpt-abc", START, EXPIRY, policy_id)
    assert _fields(token)["spr"] == "https"
    assert _fields(token).get("si") == policy_id


def test_an_http_endpoint_azurite_keeps_http() -> None:
    assert sas_protocol("http://127.0.0.1:10000/devstoreaccount1/") is None
    assert sas_protocol("https://acct.blob.core.windows.net/") == "https"
    assert sas_protocol("") == "https", "no URL known: the safe default"


def test_azurite_connection_string_signs_without_spr(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {
        "extra": {
            "connection_string": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={KEY};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
        }
    }
    token = _hook(monkeypatch, conn).container_sas("ckpt-abc", START, EXPIRY, "p1")
    assert "spr" not in _fields(token)


class _Service:
    """The service client's part the user-delegation branch uses: the key the identity would get."""

    account_name = "acct"

    def __init__(self) -> None:
        self.asked: list[tuple[datetime, datetime]] = []

    def get_user_delegation_key(self, start: datetime, expiry: datetime, **kwargs: Any) -> UserDelegationKey:
        self.asked.append((start, expiry))
        key = UserDelegationKey()  # type: ignore[no-untyped-call]
        key.signed_oid, key.signed_tid = "11111111-oid", "22222222-tid"
        key.signed_start, key.signed_expiry = start.isoformat(), expiry.isoformat()
        key.signed_service, key.signed_version, key.value = "b", "2021-08-06", KEY
        return key


def test_a_user_delegation_sas_is_https_only_and_carries_its_own_short_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hook = _hook(
        monkeypatch,
        {
            "host": "https://acct.blob.core.windows.net",
            "extra": {"workload_identity_tenant_id": "00000000-0000-0000-0000-000000000000"},
        },
    )
    service = _Service()
    monkeypatch.setattr(hook, "service", lambda: service)
    assert not hook.binds_sas_to_policy
    token = hook.container_sas("ckpt-abc", START, EXPIRY)
    fields = _fields(token)
    assert fields["spr"] == "https"
    assert fields["skoid"] == "11111111-oid" and "si" not in fields, "user-delegation, no stored policy"
    assert fields["se"] == "2030-01-01T01:00:00Z" and fields["sr"] == "c"
    assert service.asked == [(START, EXPIRY)], "the delegation key lives no longer than the SAS"
