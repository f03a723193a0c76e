"""Blob connection fields -> how to authenticate (connection string, shared key, SAS, Azure identity)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .blob_errors import BlobConfigError, register_secret


@dataclass(frozen=True)
class BlobAuth:
    """How to reach one storage account. Secrets never appear in ``repr``."""

    kind: str  # "connection_string" | "shared_key" | "sas" | "service_principal" | "default_credential"
    # | "credential"
    account_url: str
    connection_string: str | None = field(default=None, repr=False)
    account_name: str | None = None
    secret: str | None = field(default=None, repr=False)  # account key, SAS token or client secret
    credential: Any = field(default=None, repr=False)  # a ready credential object (kind "credential")
    managed_identity_client_id: str | None = None
    workload_identity_tenant_id: str | None = None
    tenant_id: str | None = None  # service principal (with client_id and secret)
    client_id: str | None = None
    client_secret_auth_config: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        register_secret(self.secret)
        for part in (self.connection_string or "").split(";"):
            key, _, value = part.partition("=")
            if key.strip().lower() in {"accountkey", "sharedaccesssignature"}:
                register_secret(value)


def account_url_from_connection_string(connection_string: str) -> str:
    """The Blob endpoint a connection string points at (for messages; the SDK parses it for real)."""
    parts = {
        k.strip().lower(): v.strip() for k, _, v in (p.partition("=") for p in connection_string.split(";"))
    }
    if parts.get("usedevelopmentstorage", "").lower() == "true":
        return "http://127.0.0.1:10000/devstoreaccount1/"
    if parts.get("blobendpoint"):
        return parts["blobendpoint"].rstrip("/") + "/"
    protocol = parts.get("defaultendpointsprotocol", "https")
    suffix = parts.get("endpointsuffix", "core.windows.net")
    return f"{protocol}://{parts.get('accountname', '<account>')}.blob.{suffix}/"


def account_name_from_url(account_url: str) -> str | None:
    """``acct`` from ``https://acct.blob.core.windows.net/`` or ``http://127.0.0.1:10000/acct`` (Azurite)."""
    parts = urlsplit(account_url)
    host = parts.hostname or ""
    if re.fullmatch(r"[0-9.]+|localhost|\[.*\]|[^.]+", host):
        segment = parts.path.strip("/").split("/")[0]
        return segment or None
    return host.split(".")[0] or None


def parse_blob_account_url(host: str | None, login: str | None) -> str:
    """The account URL as the microsoft-azure provider's ``WasbHook`` derives it from host and login."""
    account_url = host if host else f"https://{login}.blob.core.windows.net/"
    parts = urlsplit(account_url)
    if not parts.scheme:
        account_url = "https://" + account_url
        parts = urlsplit(account_url)
    netloc = parts.netloc
    if "." not in netloc and not re.fullmatch(r"(localhost|\[.*\])(:\d+)?", netloc):
        netloc = f"{login}.blob.core.windows.net"  # host held only a tenant / directory id
    head, dot, rest = netloc.partition(".")
    netloc = head[:24] + dot + rest  # an account name has at most 24 characters
    return f"{parts.scheme}://{netloc}{parts.path}"


CONN_TYPE = "kueue_blob"
"""The provider's connection type for the checkpoint store (its form: ``hooks.blob_connection_form``)."""
EXTRA_PREFIXES = ("extra__wasb__", f"extra__{CONN_TYPE}__")
"""The prefixes older connection forms stored extra fields under (``wasb``, and this provider's
``kueue_blob``); a field is read with or without its prefix."""


def _unprefixed(key: str) -> str:
    for prefix in EXTRA_PREFIXES:
        key = key.removeprefix(prefix)
    return key


def auth_from_connection(
    conn_id: str, host: str | None, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> BlobAuth:
    """Map connection fields (a ``kueue_blob`` or a ``wasb`` connection: the same fields) to a
    :class:`BlobAuth` with the meanings of the microsoft-azure ``wasb`` connection (``WasbHook.get_conn``),
    in its order:

    1. extra ``connection_string``;
    2. extra ``tenant_id``: a service principal, ``login`` = client id, ``password`` = client secret (extra
       ``client_secret_auth_config`` passed to ClientSecretCredential);
    3. extra ``shared_access_key``: the account key;
    4. extra ``sas_token``: a token, or an ``https://`` URL that carries one;
    5. ``password`` (or extra ``account_key``): the account key, the account name from ``login`` or the URL;
    6. else DefaultAzureCredential (extra ``managed_identity_client_id`` / ``workload_identity_tenant_id``).

    The account URL is ``host``, or ``https://<login>.blob.core.windows.net/``.
    """
    fields = {_unprefixed(str(k)): v for k, v in extra.items() if v not in (None, "")}
    if fields.get("connection_string"):
        cs = str(fields["connection_string"])
        return BlobAuth("connection_string", account_url_from_connection_string(cs), connection_string=cs)
    if not host and not login and not str(fields.get("sas_token", "")).startswith("https"):
        raise BlobConfigError(
            f"Blob connection {conn_id!r} has no usable fields: set extra 'connection_string', or 'host' "
            "(account URL, e.g. https://<account>.blob.core.windows.net/) or 'login' (account name) together "
            "with 'password' (account key), extra 'shared_access_key', 'sas_token' or 'tenant_id' (service "
            "principal), or nothing more for DefaultAzureCredential"
        )
    account_url = parse_blob_account_url(host, login) if host or login else ""
    if fields.get("tenant_id"):
        if not login or not password:
            raise BlobConfigError(
                f"Blob connection {conn_id!r} sets tenant_id (a service principal): put its client id in "
                "'login' and its client secret in 'password'"
            )
        return BlobAuth(
            "service_principal",
            account_url,
            secret=password,
            tenant_id=str(fields["tenant_id"]),
            client_id=login,
            client_secret_auth_config=dict(fields.get("client_secret_auth_config") or {}),
        )
    key = fields.get("shared_access_key")
    if not key and fields.get("sas_token"):
        sas = str(fields["sas_token"])
        if sas.startswith("https"):
            url = urlsplit(sas)
            return BlobAuth("sas", f"{url.scheme}://{url.netloc}{url.path}", secret=url.query)
        return BlobAuth("sas", account_url, secret=sas.lstrip("?"))
    key = key or password or fields.get("account_key")
    if key:
        name = account_name_from_url(account_url) if host else login
        if not name:
            raise BlobConfigError(f"Blob connection {conn_id!r}: set 'login' to the account name for the key")
        return BlobAuth("shared_key", account_url, account_name=name, secret=str(key))
    return BlobAuth(
        "default_credential",
        account_url,
        managed_identity_client_id=fields.get("managed_identity_client_id"),
        workload_identity_tenant_id=fields.get("workload_identity_tenant_id"),
    )


def credential_for(auth: BlobAuth, *, aio: bool) -> Any:
    if auth.kind == "shared_key":
        return {"account_name": auth.account_name, "account_key": auth.secret}
    if auth.kind == "sas":
        return auth.secret
    if auth.kind == "credential":
        return auth.credential
    if auth.kind == "service_principal":
        if aio:
            from azure.identity.aio import ClientSecretCredential as AsyncClientSecretCredential

            return AsyncClientSecretCredential(
                str(auth.tenant_id), str(auth.client_id), str(auth.secret), **auth.client_secret_auth_config
            )
        from azure.identity import ClientSecretCredential

        return ClientSecretCredential(
            str(auth.tenant_id), str(auth.client_id), str(auth.secret), **auth.client_secret_auth_config
        )
    ids = {
        k: v
        for k, v in (
            ("managed_identity_client_id", auth.managed_identity_client_id),
            ("workload_identity_tenant_id", auth.workload_identity_tenant_id),
        )
        if v
    }
    if aio:
        from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential

        return AsyncDefaultAzureCredential(**ids)
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential(**ids)


def check_sas_not_expired(token: str, now: datetime) -> None:
    """Fail early (BlobConfigError) with a SAS whose own expiry (``se=``) has passed, saying what sets it: a
    Job that queued longer than its pods' credential gets pods that could never checkpoint. A SAS bound to
    a stored access policy (``si=``) carries no expiry: the operator refreshes that one on reattach."""
    expiry = (parse_qs(token.lstrip("?")).get("se") or [""])[0]
    if not expiry:
        return
    try:
        ends = datetime.fromisoformat(expiry.replace("Z", "+00:00"))
    except ValueError:
        return
    if ends <= now:
        raise BlobConfigError(
            f"the pod's checkpoint SAS expired at {expiry}: the Job waited or ran longer than its "
            "credential, Checkpointing(credential_ttl=...) of the operator (default 48 h, at most 7 days), "
            "or (an Azure identity signs it) its trigger did not re-sign it in time: is the triggerer up? "
            "Raise credential_ttl, or retry the task: a new try signs a new SAS"
        )


def container_url_of(auth: BlobAuth, container: str) -> str:
    parts = urlsplit(auth.account_url)
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/{container}"  # drops any ?query (SAS)
