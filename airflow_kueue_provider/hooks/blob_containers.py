"""Account-level Blob calls for per-task-instance shard containers: create, sign a SAS, list, delete.

The operator creates a task instance's shard container (see ``kueue.checkpoint_access``) and signs a SAS
for it alone; the sweep lists those containers and removes the empty, expired ones. Signing needs either
the account key (a connection string with ``AccountKey``, or ``login`` + ``password``) or an Azure identity
that may ask for a user-delegation key (AKS workload identity / managed identity with the role "Storage
Blob Delegator" plus data access): a connection that itself holds only a SAS cannot mint a narrower one.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerSasPermissions, generate_container_sas

from ..kueue.checkpoint_access import (
    PREFIX_METADATA,
    SHARD_CONTAINER_HEAD,
    SHARD_SAS_PERMISSIONS,
    is_shard_container_of,
)
from ..storage.blob_auth import BlobAuth, credential_for
from ..storage.blob_errors import BlobConfigError, register_secret
from .blob_store import BlobStoreHook

IDENTITY_KINDS = ("default_credential", "service_principal", "credential")  # may get a user-delegation key


class BlobAccountHook(BlobStoreHook):
    """A :class:`BlobStoreHook` on the base container that also manages its shard containers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._service: BlobServiceClient | None = None

    def __enter__(self) -> BlobAccountHook:
        return self

    def service(self) -> BlobServiceClient:
        if self._service is None:
            auth = self.get_auth()
            if auth.kind == "connection_string":
                assert auth.connection_string is not None
                self._service = BlobServiceClient.from_connection_string(
                    auth.connection_string, retry_total=0
                )
            else:
                credential = credential_for(auth, aio=False)
                self._service = BlobServiceClient(auth.account_url, credential, retry_total=0)
        return self._service

    def close(self) -> None:
        super().close()
        if self._service is not None:
            self._service.close()
            self._service = None

    def container_hook(self, name: str) -> BlobStoreHook:
        """A hook on another container of the same account, with the same credential."""
        return BlobStoreHook(
            self.blob_conn_id, name, create_container=False, retry=self.retry, auth=self.get_auth()
        )

    def ensure_container(self, name: str, prefix: str) -> None:
        """Create the shard container of ``prefix`` (kept if it exists: a retry resumes from it)."""
        client = self.service().get_container_client(name)

        def op(kw: dict[str, Any]) -> None:
            with contextlib.suppress(ResourceExistsError):
                client.create_container(metadata={PREFIX_METADATA: prefix}, **kw)

        self._run(f"create container {name}", op)

    def check_can_sign(self) -> None:
        """BlobConfigError when this connection cannot sign a container SAS (it holds only a SAS itself)."""
        auth = self.get_auth()
        if _signing_key(auth) is None and auth.kind not in IDENTITY_KINDS:
            raise BlobConfigError(
                f"Blob connection {self.blob_conn_id!r} cannot sign a SAS for the shards' container: it "
                "holds a SAS token itself. Give it the account key (connection string with AccountKey, or "
                "login + password) or an Azure identity (workload / managed identity with the 'Storage Blob "
                "Delegator' role), or set Checkpointing(workload_identity_service_account=...) so pods use "
                "their own identity"
            )

    def container_sas(self, name: str, start: datetime, expiry: datetime) -> str:
        """A SAS token for container ``name`` only (read, add, create, write, delete, list), valid from
        ``start`` to ``expiry``: account-key signed, or user-delegation signed with an Azure identity."""
        self.check_can_sign()
        auth = self.get_auth()
        permission = ContainerSasPermissions.from_string(SHARD_SAS_PERMISSIONS)
        key = _signing_key(auth)
        if key is not None:
            token = generate_container_sas(
                key[0], name, account_key=key[1], permission=permission, start=start, expiry=expiry
            )
        else:
            service = self.service()
            delegation = self._run(
                "get a user delegation key", lambda kw: service.get_user_delegation_key(start, expiry, **kw)
            )
            token = generate_container_sas(
                str(service.account_name),
                name,
                user_delegation_key=delegation,
                permission=permission,
                start=start,
                expiry=expiry,
            )
        register_secret(token)
        return str(token)

    def shard_containers(self) -> dict[str, tuple[str, datetime]]:
        """``{name: (task-instance prefix, last modified)}`` of this base container's shard containers."""
        service = self.service()
        head = self.container[:SHARD_CONTAINER_HEAD].rstrip("-") + "-"

        def op(kw: dict[str, Any]) -> dict[str, tuple[str, datetime]]:
            found: dict[str, tuple[str, datetime]] = {}
            for props in service.list_containers(name_starts_with=head, include_metadata=True, **kw):
                prefix = (props.metadata or {}).get(PREFIX_METADATA)
                if prefix and is_shard_container_of(self.container, props.name):
                    found[props.name] = (prefix, props.last_modified)
            return found

        return self._run("list shard containers", op)

    def delete_container_if_empty(self, name: str) -> bool:
        """Delete a shard container that holds no blob now; False when a blob appeared or it is gone."""
        client = self.service().get_container_client(name)

        def op(kw: dict[str, Any]) -> bool:
            try:
                if next(iter(client.list_blobs(results_per_page=1, **kw)), None) is not None:
                    return False
                client.delete_container(**kw)
                return True
            except ResourceNotFoundError:
                return False

        return self._run(f"delete container {name}", op)


def _signing_key(auth: BlobAuth) -> tuple[str, str] | None:
    """(account name, account key) when the connection holds the key."""
    if auth.connection_string:
        parts = {
            k.strip().lower(): v.strip()
            for k, _, v in (p.partition("=") for p in auth.connection_string.split(";"))
            if k.strip()
        }
        name, key = parts.get("accountname"), parts.get("accountkey")
    elif auth.kind == "shared_key":
        name, key = auth.account_name, auth.secret
    else:
        return None
    return (name, key) if name and key else None
