"""Blob connection fields -> how to authenticate (connection string, shared key, SAS, Azure identity)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .blob_errors import BlobConfigError, register_secret


@dataclass(frozen=True)
class BlobAuth:
    """How to reach one storage account. Secrets never appear in ``repr``."""

    kind: str  # "connection_string" | "shared_key" | "sas" | "default_credential" | "credential"
    account_url: str
    connection_string: str | None = field(default=None, repr=False)
    account_name: str | None = None
    secret: str | None = field(default=None, repr=False)  # account key or SAS token
    credential: Any = field(default=None, repr=False)  # a ready credential object (kind "credential")
    managed_identity_client_id: str | None = None
    workload_identity_tenant_id: str | None = None

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


def auth_from_connection(
    conn_id: str, host: str | None, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> BlobAuth:
    """Map connection fields to a :class:`BlobAuth`, like the microsoft-azure ``wasb`` connection.

    Order: extra ``connection_string``; else an account URL from ``host`` (or ``login`` = account name) with
    ``password`` (account key), extra ``sas_token``, or DefaultAzureCredential (extra
    ``managed_identity_client_id`` / ``workload_identity_tenant_id``; workload identity on AKS).
    """
    fields = {str(k).removeprefix("extra__wasb__"): v for k, v in extra.items() if v not in (None, "")}
    if fields.get("connection_string"):
        cs = str(fields["connection_string"])
        return BlobAuth("connection_string", account_url_from_connection_string(cs), connection_string=cs)
    if host:
        account_url = host if "://" in host else f"https://{host}"
    elif login:
        account_url = f"https://{login}.blob.core.windows.net/"
    else:
        raise BlobConfigError(
            f"Blob connection {conn_id!r} has no usable fields: set extra 'connection_string', or 'host' "
            "(account URL, e.g. https://<account>.blob.core.windows.net/) or 'login' (account name) together "
            "with 'password' (account key), extra 'sas_token', or nothing more for DefaultAzureCredential"
        )
    if password:
        name = login or account_name_from_url(account_url)
        if not name:
            raise BlobConfigError(f"Blob connection {conn_id!r}: set 'login' to the account name for the key")
        return BlobAuth("shared_key", account_url, account_name=name, secret=password)
    if fields.get("sas_token"):
        return BlobAuth("sas", account_url, secret=str(fields["sas_token"]).lstrip("?"))
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


def container_url_of(auth: BlobAuth, container: str) -> str:
    parts = urlsplit(auth.account_url)
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/{container}"  # drops any ?query (SAS)


def no_airflow(conn_id: str) -> BlobConfigError:
    return BlobConfigError(
        f"cannot read Airflow connection {conn_id!r}: Airflow is not installed here; use "
        "from_connection_string() or from_account_url()"
    )
