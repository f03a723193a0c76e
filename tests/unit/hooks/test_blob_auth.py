"""A wasb connection means here what it means to the microsoft-azure provider's WasbHook, field by field."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.storage.blob_auth import (
    auth_from_connection,
    credential_for,
    parse_blob_account_url,
)
from airflow_kueue_provider.storage.blob_errors import BlobConfigError

ACCT = "https://acct.blob.core.windows.net/"
CS = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net"

# (host, login, password, extra) -> (kind, account_url, account_name, secret) in WasbHook.get_conn's order
CASES: list[tuple[str, Any, Any, Any, dict[str, Any], tuple[str, str, Any, Any]]] = [
    ("connection string wins over everything",
     "h.blob.core.windows.net", "l", "p", {"connection_string": CS, "tenant_id": "t", "sas_token": "sv=1"},
     ("connection_string", ACCT, None, None)),
    ("prefixed extra (old UI form)", None, None, None, {"extra__wasb__connection_string": CS},
     ("connection_string", ACCT, None, None)),
    ("service principal: login = client id, password = secret",
     None, "acct", "client-secret", {"tenant_id": "tenant-1"},
     ("service_principal", ACCT, None, "client-secret")),
    ("service principal with an account URL in host",
     "https://acct.blob.core.windows.net/", "app-id", "client-secret", {"tenant_id": "tenant-1"},
     ("service_principal", ACCT, None, "client-secret")),
    ("shared_access_key extra is the account key", None, "acct", None, {"shared_access_key": "a2V5"},
     ("shared_key", ACCT, "acct", "a2V5")),
    ("shared_access_key beats sas_token and password",
     None, "acct", "pw", {"shared_access_key": "key-k", "sas_token": "s"},
     ("shared_key", ACCT, "acct", "key-k")),
    ("sas token", None, "acct", None, {"sas_token": "?sv=2024&sig=abc"},
     ("sas", ACCT, None, "sv=2024&sig=abc")),
    ("sas token as a URL", None, None, None, {"sas_token": "https://other.blob.core.windows.net/?sv=1&sig=x"},
     ("sas", "https://other.blob.core.windows.net/", None, "sv=1&sig=x")),
    ("sas token beats password", None, "acct", "pw", {"sas_token": "sv=1&sig=y"},
     ("sas", ACCT, None, "sv=1&sig=y")),
    ("password is the account key", "acct.blob.core.windows.net", None, "a2V5", {},
     ("shared_key", "https://acct.blob.core.windows.net", "acct", "a2V5")),
    ("login + password", None, "acct", "a2V5", {}, ("shared_key", ACCT, "acct", "a2V5")),
    ("account_key extra when no password", None, "acct", None, {"account_key": "a2V5"},
     ("shared_key", ACCT, "acct", "a2V5")),
    ("Azurite path-style host + key", "http://127.0.0.1:10000/devstoreaccount1", None, "a2V5", {},
     ("shared_key", "http://127.0.0.1:10000/devstoreaccount1", "devstoreaccount1", "a2V5")),
    ("managed identity", None, "acct", None, {"managed_identity_client_id": "mi"},
     ("default_credential", ACCT, None, None)),
    ("workload identity", "acct.blob.core.windows.net", None, None, {"workload_identity_tenant_id": "t"},
     ("default_credential", "https://acct.blob.core.windows.net", None, None)),
    ("nothing but an account: DefaultAzureCredential", None, "acct", None, {},
     ("default_credential", ACCT, None, None)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("host", "login", "password", "extra", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_every_wasb_field_combination_means_what_wasb_hook_means(
    host: str | None,
    login: str | None,
    password: str | None,
    extra: dict[str, Any],
    expected: tuple[str, str, Any, Any],
) -> None:
    auth = auth_from_connection("blob", host, login, password, extra)
    kind, url, name, secret = expected
    assert (auth.kind, auth.account_url) == (kind, url)
    if name is not None:
        assert auth.account_name == name
    if secret is not None:
        assert auth.secret == secret
        assert secret not in repr(auth)


def test_a_service_principal_builds_a_client_secret_credential() -> None:
    auth = auth_from_connection(
        "blob", None, "app-id", "client-secret", {"tenant_id": "tenant-1", "client_secret_auth_config": {}}
    )
    credential = credential_for(auth, aio=False)
    assert type(credential).__name__ == "ClientSecretCredential"
    assert type(credential_for(auth, aio=True)).__name__ == "ClientSecretCredential"


def test_managed_and_workload_identity_build_default_azure_credential() -> None:
    auth = auth_from_connection("blob", None, "acct", None, {"managed_identity_client_id": "mi"})
    assert type(credential_for(auth, aio=False)).__name__ == "DefaultAzureCredential"


@pytest.mark.parametrize(
    ("extra", "login", "password", "message"),
    [
        ({"tenant_id": "t"}, "acct", None, "client id in 'login' and its client secret in 'password'"),
        ({"unrelated": "x"}, None, None, "no usable fields"),
    ],
)
def test_incomplete_connections_say_what_to_set(
    extra: dict[str, Any], login: str | None, password: str | None, message: str
) -> None:
    with pytest.raises(BlobConfigError, match=message):
        auth_from_connection("blob", None, login, password, extra)


@pytest.mark.parametrize(
    ("host", "login", "url"),
    [
        (None, "acct", "https://acct.blob.core.windows.net/"),
        ("acct.blob.core.windows.net", None, "https://acct.blob.core.windows.net"),
        ("https://acct.blob.core.windows.net/", None, "https://acct.blob.core.windows.net/"),
        ("http://127.0.0.1:10000/devstoreaccount1", None, "http://127.0.0.1:10000/devstoreaccount1"),
        ("tenant-guid-only", "acct", "https://acct.blob.core.windows.net"),
        (
            "https://" + "a" * 30 + ".blob.core.windows.net/",
            None,
            "https://" + "a" * 24 + ".blob.core.windows.net/",
        ),
    ],
)
def test_account_urls_are_derived_as_wasb_hook_derives_them(
    host: str | None, login: str | None, url: str
) -> None:
    assert parse_blob_account_url(host, login) == url
