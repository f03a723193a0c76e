"""Where the identity seal's key comes from (hooks/identity_key.py)."""

from __future__ import annotations

import hashlib

import pytest

from airflow_kueue_provider.hooks import identity_key, kueue_config
from airflow_kueue_provider.hooks.identity_key import IdentityKeyMissing, configured_identity_key

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
    source = kueue_config.ConfigSource({"AIRFLOW__KUEUE__IDENTITY_KEY": "platform-key"})
    monkeypatch.setattr(kueue_config, "current_source", lambda: source)
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "fernet")
    monkeypatch.setenv("AIRFLOW__KUEUE__IDENTITY_KEY", "a DAG file's")  # not at exec: not read
    assert configured_identity_key() == b"platform-key"


def test_unset_it_is_derived_from_fernet_key_then_jwt_secret_then_secret_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__API__SECRET_KEY", "secret")
    assert configured_identity_key() == _derived("secret")
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "jwt")
    assert configured_identity_key() == _derived("jwt")
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "fernet")
    assert configured_identity_key() == _derived("fernet") != b"fernet"


def test_no_secret_is_a_typed_error_naming_the_option() -> None:
    """Airflow's own defaults for jwt_secret and secret_key are random per process: they do not count."""
    with pytest.raises(IdentityKeyMissing, match=r"set \[kueue\] identity_key"):
        configured_identity_key()
