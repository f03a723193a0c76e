"""Secrets never reach messages; connection fields map to the right way of authenticating (no network)."""

from __future__ import annotations

from datetime import UTC

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ServiceRequestError

from airflow_kueue_provider.storage import blob_errors, blob_retry
from airflow_kueue_provider.storage.blob_auth import auth_from_connection
from airflow_kueue_provider.storage.blob_errors import (
    BlobConfigError,
    BlobPreconditionFailed,
    BlobUnavailable,
    redact,
)
from airflow_kueue_provider.storage.blob_retry import RetryPolicy

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def test_connection_string_secrets_are_masked() -> None:
    cs = (
        f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={KEY};SharedAccessSignature=sv=1&sig=abc%2B"
    )
    text = redact(f"failed with {cs}")
    assert KEY not in text and "abc%2B" not in text
    assert "AccountKey=***" in text and "SharedAccessSignature=***" in text and "AccountName=a" in text


def test_sas_signature_in_a_url_is_masked() -> None:
    text = redact("GET https://a.blob.core.windows.net/c/b?sv=2024-01-01&sp=r&sig=s3cr3t%2Fvalue&se=x failed")
    assert "s3cr3t" not in text and "sig=***" in text and "sp=r" in text


def test_shared_key_header_and_azure_mac_detail_are_masked() -> None:
    text = redact(
        "Authorization: SharedKey acct:Zm9vYmFy== ... signature found in the HTTP request 'bWFj' is"
    )
    assert "Zm9vYmFy" not in text and "bWFj" not in text


def test_registered_secrets_are_masked_anywhere_even_url_encoded() -> None:
    blob_errors.register_secret("my-very-secret/key+")
    assert redact("x my-very-secret/key+ y my-very-secret%2Fkey%2B") == "x *** y ***"


def test_auth_records_register_their_secrets() -> None:
    auth = auth_from_connection("c", "https://acct.blob.core.windows.net", None, "a-password-123", {})
    assert (auth.kind, auth.account_name) == ("shared_key", "acct")
    assert "a-password-123" not in repr(auth) and redact("a-password-123") == "***"


@pytest.mark.parametrize(
    ("host", "login", "password", "extra", "kind", "url"),
    [
        (None, None, None, {"connection_string": "AccountName=x;AccountKey=eQ=="}, "connection_string", None),
        (None, None, None, {"extra__wasb__connection_string": "UseDevelopmentStorage=true"},
         "connection_string", "http://127.0.0.1:10000/devstoreaccount1/"),
        ("http://127.0.0.1:10000/devstoreaccount1", None, "a2V5", {}, "shared_key", None),
        (None, "acct", None, {"sas_token": "?sv=1&sig=x"}, "sas", "https://acct.blob.core.windows.net/"),
        ("acct.blob.core.windows.net", None, None, {"managed_identity_client_id": "id"}, "default_credential",
         "https://acct.blob.core.windows.net"),
    ],
)  # fmt: skip
def test_wasb_style_fields(
    host: str | None,
    login: str | None,
    password: str | None,
    extra: dict[str, str],
    kind: str,
    url: str | None,
) -> None:
    auth = auth_from_connection("c", host, login, password, extra)
    assert auth.kind == kind
    if url:
        assert auth.account_url == url
    if kind == "shared_key":
        assert auth.account_name == "devstoreaccount1"  # Azurite's path-style URL
    if kind == "sas":
        assert auth.secret == "sv=1&sig=x"
    if kind == "default_credential":
        assert auth.managed_identity_client_id == "id"


def test_no_usable_fields_says_what_to_set() -> None:
    with pytest.raises(BlobConfigError, match=r"no usable fields.*connection_string.*host.*login"):
        auth_from_connection("kueue_blob_default", None, None, None, {"unrelated": "x"})


def _http_error(status: int, code: str) -> HttpResponseError:
    error = (ResourceExistsError if status == 409 else HttpResponseError)(message=f"HTTP {status} {code}")
    error.status_code = status
    error.error_code = code  # type: ignore[attr-defined]  # set by azure-storage's error parsing
    return error


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (_http_error(412, "ConditionNotMet"), BlobPreconditionFailed),
        (_http_error(409, "BlobAlreadyExists"), BlobPreconditionFailed),
        (_http_error(403, "AuthorizationFailure"), BlobConfigError),
        (_http_error(404, "ContainerNotFound"), BlobConfigError),
        (_http_error(409, "LeaseIdMissing"), type(None)),
    ],
)
def test_error_mapping(exc: HttpResponseError, expected: type) -> None:
    assert isinstance(blob_retry._translate(exc, "write x", "http://h/acct/c"), expected)


def test_transient_faults_are_retried_then_reported_unavailable() -> None:
    attempts = blob_retry._Attempts(RetryPolicy(attempts=3, base_delay=0.01), "write x", "http://h/c", None)
    failure = ServiceRequestError(f"connection refused for ...?sig={KEY}")
    attempts.request_kwargs()
    assert 0.005 <= attempts.failed(failure) <= 0.01
    attempts.request_kwargs()
    attempts.failed(_http_error(503, "ServerBusy"))
    attempts.request_kwargs()
    with pytest.raises(BlobUnavailable, match="after 3 attempt") as info:
        attempts.failed(failure)
    assert KEY not in str(info.value) and info.value.__cause__ is None and info.value.__suppress_context__


def test_a_deadline_caps_request_timeouts_and_stops_retries() -> None:
    attempts = blob_retry._Attempts(
        RetryPolicy(attempts=50, base_delay=5.0), "flush", "http://h/c", budget=1.0
    )
    assert attempts.request_kwargs()["read_timeout"] <= 1.0
    with pytest.raises(BlobUnavailable):
        attempts.failed(ServiceRequestError("refused"))  # the next delay would overrun the budget


def test_backoff_is_capped() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=2.0)
    assert all(policy.delay(n) <= 2.0 for n in range(1, 30)) and policy.delay(1) <= 0.5


def test_a_pod_with_an_expired_sas_fails_early_naming_credential_ttl() -> None:
    from datetime import datetime

    from airflow_kueue_provider.storage.blob_auth import check_sas_not_expired
    from airflow_kueue_provider.storage.blob_errors import BlobConfigError

    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    with pytest.raises(BlobConfigError, match=r"expired at 2026-12-02T11:00:00Z.*credential_ttl"):
        check_sas_not_expired("sv=2024&se=2026-12-02T11%3A00%3A00Z&sr=c&sig=x", now)
    check_sas_not_expired("sv=2024&se=2026-12-02T13%3A00%3A00Z&sr=c&sig=x", now)  # still valid
    check_sas_not_expired("sv=2024&si=policy&sr=c&sig=x", now)  # policy-bound: the operator refreshes it
