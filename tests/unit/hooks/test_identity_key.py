"""Where the identity seal's key comes from (hooks/identity_key.py)."""

from __future__ import annotations

import hashlib

import pytest

from airflow_kueue_provider.hooks import identity_key, kueue_config
from airflow_kueue_provider.hooks.identity_key import (
    IdentityKeyMissing,
    IdentityKeyTooShort,
    configured_identity_key,
)

PLATFORM_KEY = "platform-key-0123456789abcdef0123456789"
SECRETS = ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY")


@pytest.fixture(autouse=True)
def _no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing configured: [kueue] from an empty source, Airflow's secrets at their (per-process) defaults."""
    monkeypatch.setattr(kueue_config, "current_source", lambda: kueue_config.ConfigSource({}))
    for name in SECRETS:
        monkeypatch.delenv(name, raising=False)


def _derived(secret: str) -> bytes:
    return hashlib.sha256(identity_key._DERIVATION_CONTEXT + secret.encode()).digest()


def test_the_own_option_wins_and_is_read_as_the_platform_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    source = kueue_config.ConfigSource({"AIRFLOW__KUEUE__IDENTITY_KEY": PLATFORM_KEY})
    monkeypatch.setattr(kueue_config, "current_source", lambda: source)
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "fernet-0123456789")
    monkeypatch.setenv("AIRFLOW__KUEUE__IDENTITY_KEY", "a DAG file's")  # not at exec: not read
    assert configured_identity_key() == PLATFORM_KEY.encode()


def test_unset_it_is_derived_from_fernet_key_then_jwt_secret_then_secret_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__API__SECRET_KEY", "secret-0123456789")
    assert configured_identity_key() == _derived("secret-0123456789")
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "jwt-0123456789abc")
    assert configured_identity_key() == _derived("jwt-0123456789abc")
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "fernet-0123456789")
    assert configured_identity_key() == _derived("fernet-0123456789") != b"fernet-0123456789"


def test_no_secret_is_a_typed_error_naming_the_option() -> None:
    """Airflow's own defaults for jwt_secret and secret_key are random per process: they do not count."""
    with pytest.raises(IdentityKeyMissing, match=r"set \[kueue\] identity_key"):
        configured_identity_key()


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"AIRFLOW__KUEUE__IDENTITY_KEY": "changeme"}, r"\[kueue\] identity_key has 8 characters"),
        ({"AIRFLOW__KUEUE__IDENTITY_KEY": "x" * 31}, r"has 31 characters; the identity seal needs at least"),
    ],
)
def test_a_short_key_is_a_typed_error_saying_how_long_and_how_to_make_one(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], named: str
) -> None:
    source = kueue_config.ConfigSource(environ)
    monkeypatch.setattr(kueue_config, "current_source", lambda: source)
    with pytest.raises(IdentityKeyTooShort, match=named) as short:
        configured_identity_key()
    assert "secrets.token_hex(32)" in str(short.value) and environ["AIRFLOW__KUEUE__IDENTITY_KEY"] not in str(
        short.value
    ), "the message says how to make one and never repeats the key"


def test_a_short_secret_to_derive_from_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "jwt")
    derived = r"\[api_auth\] jwt_secret \(the key is derived from it\) has 3"
    with pytest.raises(IdentityKeyTooShort, match=derived):
        configured_identity_key()
