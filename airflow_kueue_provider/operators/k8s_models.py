"""Kubernetes client models (``V1EnvVar``, ``V1ResourceRequirements``, ``V1Job``, ...) as the API's dicts.

A KubernetesPodOperator user passes models; the domain model reads plain dicts with the API's camelCase
keys. Converting at the operator's door keeps one representation inside, and makes the values templatable
like any dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes.client import ApiClient

_CLIENT = ApiClient()  # only its model -> dict conversion is used: no configuration, no connection


def plain(value: Any) -> Any:
    """``value`` with every Kubernetes model in it (at any depth) turned into its API dict."""
    if value is None or isinstance(value, (str, bytes, int, float, bool)):
        return value
    if hasattr(value, "openapi_types") and hasattr(value, "attribute_map"):
        return _CLIENT.sanitize_for_serialization(value)
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def secret_names(value: str | Sequence[Any] | None) -> list[str] | None:
    """Image pull secrets as KubernetesPodOperator takes them: ``"a,b"``, names, or V1LocalObjectReference."""
    if value is None:
        return None
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    names: list[str] = []
    for item in value:
        item = plain(item)
        names.append(str(item.get("name")) if isinstance(item, Mapping) else item)
    return names


def from_secrets(secrets: Sequence[Any] | None) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The cncf provider's ``Secret`` objects as (env, env_from, volumes, volume_mounts) dicts, as
    KubernetesPodOperator attaches them: ``env`` with a key -> one variable, ``env`` without -> every key,
    ``volume`` -> a Secret volume mounted at its target."""
    env: list[Any] = []
    env_from: list[Any] = []
    volumes: list[Any] = []
    mounts: list[Any] = []
    for secret in secrets or ():
        kind = getattr(secret, "deploy_type", None)
        if kind == "volume":
            volume, mount = secret.to_volume_secret()
            volumes.append(plain(volume))
            mounts.append(plain(mount))
        elif kind == "env" and getattr(secret, "key", None) is not None:
            env.append(plain(secret.to_env_secret()))
        elif kind == "env":
            env_from.append(plain(secret.to_env_from_secret()))
        else:
            raise TypeError(
                f"secrets: {secret!r} is not an airflow.providers.cncf.kubernetes.secret.Secret "
                "(deploy_type 'env' or 'volume')"
            )
    return env, env_from, volumes, mounts
