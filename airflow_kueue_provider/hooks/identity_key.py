"""The identity seal's key (``kueue.identity.identity_seal``), read from Airflow's configuration.

``[kueue] identity_key`` (env ``AIRFLOW__KUEUE__IDENTITY_KEY``); unset, it is derived from a secret every
Airflow component of one deployment already shares: ``[core] fernet_key``, else ``[api_auth] jwt_secret``,
else ``[api] secret_key``. Airflow's own defaults for the last two are random per process (they would give
each worker other names and seals), so a value equal to the default counts as unset. The key is never logged.
A key shorter than ``MIN_KEY_CHARACTERS`` (a derivation source shorter than ``MIN_SOURCE_CHARACTERS``) fails
the task: the seal is only as strong as the key, and a short one can be guessed offline from any sealed Job.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..airflow_compat import AirflowFailException, task_conf
from ..kueue.errors import KueueProviderError
from ..kueue.identity.identity_seal import IdentitySeal
from .kueue_config import SECTION, kueue_option

OPTION = "identity_key"
DERIVED_FROM = (("core", "fernet_key"), ("api_auth", "jwt_secret"), ("api", "secret_key"))
_DERIVATION_CONTEXT = b"airflow-kueue-provider identity seal key v1\x00"
MIN_KEY_CHARACTERS = 32
"""``[kueue] identity_key``: e.g. ``python -c 'import secrets; print(secrets.token_hex(32))'`` (64)."""
MIN_SOURCE_CHARACTERS = 16
"""A secret the key is derived from (a Fernet key has 44)."""


class IdentityKeyMissing(AirflowFailException, KueueProviderError):
    """No secret to key the identity seal with: set ``[kueue] identity_key``."""


class IdentityKeyTooShort(IdentityKeyMissing):
    """The configured key (or the secret it is derived from) is too short to key the seal with."""


def _long_enough(value: str, where: str, minimum: int) -> str:
    if len(value) < minimum:
        raise IdentityKeyTooShort(
            f"{where} has {len(value)} characters; the identity seal needs at least {minimum}: set "
            f"[{SECTION}] {OPTION} (env AIRFLOW__KUEUE__IDENTITY_KEY) to a long random secret, e.g. "
            "the output of python -c 'import secrets; print(secrets.token_hex(32))', the same on every "
            "worker, triggerer and API server. Nothing was created."
        )
    return value


def _configured(conf: Any, section: str, option: str) -> str | None:
    value = conf.get(section, option, fallback=None)
    if not value:
        return None
    default = getattr(conf, "get_default_value", lambda *_: None)(section, option)
    return None if value == default else str(value)  # a default is random per process: no shared secret


def configured_identity_key() -> bytes:
    """The one place the key is read: ``[kueue] identity_key`` through ``kueue_config`` (a DAG file cannot
    change it), else derived from Airflow's shared secrets as ``conf`` has them."""
    if own := kueue_option(OPTION):  # as the platform set it: a DAG file cannot change it
        return _long_enough(own, f"[{SECTION}] {OPTION}", MIN_KEY_CHARACTERS).encode()
    conf = task_conf()
    for section, option in DERIVED_FROM:
        if secret := _configured(conf, section, option):
            _long_enough(secret, f"[{section}] {option} (the key is derived from it)", MIN_SOURCE_CHARACTERS)
            return hashlib.sha256(_DERIVATION_CONTEXT + secret.encode()).digest()
    raise IdentityKeyMissing(
        f"no key for the identity seal: set [{SECTION}] {OPTION} (env AIRFLOW__KUEUE__IDENTITY_KEY) to a "
        "long random secret, the same on every worker, triggerer and API server (or set [core] fernet_key, "
        "which it is derived from when unset). Nothing was created."
    )


def identity_seal() -> IdentitySeal:
    """The seal under the configured key; ``IdentityKeyMissing`` when there is none."""
    return IdentitySeal(configured_identity_key())
