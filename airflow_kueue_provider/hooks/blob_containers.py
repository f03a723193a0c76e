"""Account-level Blob calls for per-task-instance shard containers: create, sign a SAS, list, delete.

The operator creates a task instance's shard container (see ``kueue.checkpoints.checkpoint_access``) and signs
a SAS for it alone; the sweep lists those containers and removes the empty, expired ones. Signing needs either
the account key (a connection string with ``AccountKey``, or ``login`` + ``password``) or an Azure identity
that may ask for a user-delegation key (AKS workload identity / managed identity with the role "Storage
Blob Delegator" plus data access): a connection that itself holds only a SAS cannot mint a narrower one.
A SAS for an https account is signed https-only (``spr=https``): a token seen once cannot be replayed over
plain http. Only an http endpoint (Azurite) gets one without.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import (
    AccessPolicy,
    BlobServiceClient,
    ContainerSasPermissions,
    generate_container_sas,
)

from ..kueue.checkpoints.checkpoint_access import (
    PREFIX_METADATA,
    SALT_METADATA,
    SHARD_CONTAINER_HEAD,
    SHARD_SAS_PERMISSIONS,
    is_shard_container_of,
    policies_to_keep,
)
from ..kueue.checkpoints.checkpoint_retention import ShardContainer
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

    def ensure_container(self, name: str, prefix: str, salt: str | None = None) -> None:
        """Create the shard container of ``prefix`` named with ``salt`` (kept if it exists: a retry resumes
        from it); its metadata says both, for the sweep."""
        client = self.service().get_container_client(name)
        metadata = {PREFIX_METADATA: prefix, **({SALT_METADATA: salt} if salt else {})}

        def op(kw: dict[str, Any]) -> None:
            with contextlib.suppress(ResourceExistsError):
                client.create_container(metadata=metadata, **kw)

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

    @property
    def binds_sas_to_policy(self) -> bool:
        """Whether this connection's SAS points at a stored access policy (account key): refreshable,
        revocable, dead on a re-created container. A user-delegation SAS carries its own expiry."""
        return _signing_key(self.get_auth()) is not None

    def container_sas(
        self, name: str, start: datetime, expiry: datetime, policy_id: str | None = None
    ) -> str:
        """A SAS token for container ``name`` only (read, add, create, write, delete, list), valid from
        ``start`` to ``expiry``. Account-key signed: bound to the stored access policy ``policy_id`` (added
        here, holding the permissions and the window); or user-delegation signed with an Azure identity.
        https-only when the account URL is https."""
        self.check_can_sign()
        auth = self.get_auth()
        permission = ContainerSasPermissions.from_string(SHARD_SAS_PERMISSIONS)
        protocol = sas_protocol(auth.account_url)
        key = _signing_key(auth)
        if key is not None and policy_id is not None:
            self.grant_access(name, policy_id, start, expiry)
            token = generate_container_sas(
                key[0], name, account_key=key[1], policy_id=policy_id, protocol=protocol
            )
        elif key is not None:
            token = generate_container_sas(
                key[0],
                name,
                account_key=key[1],
                permission=permission,
                start=start,
                expiry=expiry,
                protocol=protocol,
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
                protocol=protocol,
            )
        register_secret(token)
        return str(token)

    def _policies(self, name: str) -> dict[str, AccessPolicy]:
        client = self.service().get_container_client(name)

        def op(kw: dict[str, Any]) -> dict[str, AccessPolicy]:
            try:
                acl = client.get_container_access_policy(**kw)
            except ResourceNotFoundError:  # no container, no policy
                return {}
            return {i.id: i.access_policy for i in acl.get("signed_identifiers") or [] if i.access_policy}

        return self._run(f"read the access policies of {name}", op)

    def _set_policies(self, name: str, policies: dict[str, AccessPolicy]) -> None:
        client = self.service().get_container_client(name)
        self._run(
            f"set the access policies of {name}",
            lambda kw: client.set_container_access_policy(signed_identifiers=policies, **kw),
        )

    def grant_access(self, name: str, policy_id: str, start: datetime, expiry: datetime) -> None:
        """Add the stored access policy ``policy_id`` (the shard permissions from ``start`` to ``expiry``);
        expired policies go, and at most 4 others stay (Azure allows 5; the oldest attempts' go first)."""
        current = self._policies(name)
        keep = policies_to_keep({i: _aware(p.expiry) for i, p in current.items() if i != policy_id}, start)
        policies = {i: current[i] for i in keep}
        policies[policy_id] = AccessPolicy(
            ContainerSasPermissions.from_string(SHARD_SAS_PERMISSIONS), expiry=expiry, start=start
        )
        self._set_policies(name, policies)

    def extend_access(self, name: str, head: str, start: datetime, expiry: datetime) -> int:
        """Move the window of every policy whose id starts with ``head`` (one Job's): its SAS, already in
        a Secret and in running pods, stays valid until ``expiry``. Returns how many it moved."""
        current = self._policies(name)
        mine = [i for i in current if i.startswith(head)]
        for i in mine:
            current[i] = AccessPolicy(current[i].permission, expiry=expiry, start=start)
        if mine:
            self._set_policies(name, current)
        return len(mine)

    def revoke_access(self, name: str, head: str) -> int:
        """Drop every policy whose id starts with ``head``: a SAS bound to one stops working at once."""
        current = self._policies(name)
        kept = {i: p for i, p in current.items() if not i.startswith(head)}
        if len(kept) != len(current):
            self._set_policies(name, kept)
        return len(current) - len(kept)

    def shard_containers(self) -> dict[str, ShardContainer]:
        """This base container's shard containers by name: those whose name is the one their metadata's
        prefix and salt make (salted, or unsalted ones of before salts)."""
        service = self.service()
        head = self.container[:SHARD_CONTAINER_HEAD].rstrip("-") + "-"

        def op(kw: dict[str, Any]) -> dict[str, ShardContainer]:
            found: dict[str, ShardContainer] = {}
            for props in service.list_containers(name_starts_with=head, include_metadata=True, **kw):
                metadata = props.metadata or {}
                prefix, salt = metadata.get(PREFIX_METADATA), metadata.get(SALT_METADATA) or None
                if prefix and is_shard_container_of(self.container, props.name, prefix, salt):
                    found[props.name] = ShardContainer(prefix, props.last_modified, salt)
            return found

        return self._run("list shard containers", op)

    def delete_container_if_empty(self, name: str, unmodified_since: datetime | None = None) -> bool:
        """Delete a shard container that holds no blob now; False when a blob appeared, it is gone, or
        (``unmodified_since``: its last-modified time when the sweep listed it) a new attempt touched it
        since (each attempt's access policy changes it): the delete is conditional (412)."""
        client = self.service().get_container_client(name)
        condition: dict[str, Any] = (
            {} if unmodified_since is None else {"if_unmodified_since": unmodified_since}
        )

        def op(kw: dict[str, Any]) -> bool:
            try:
                if next(iter(client.list_blobs(results_per_page=1, **kw)), None) is not None:
                    return False
                client.delete_container(**condition, **kw)
                return True
            except ResourceNotFoundError:
                return False
            except HttpResponseError as exc:
                if exc.status_code == 412:
                    return False
                raise

        return self._run(f"delete container {name}", op)


def sas_protocol(account_url: str) -> str | None:
    """``https`` (``spr=https``) for an https account; None (the SDK's default, http and https) for an
    http one, which only a local emulator has."""
    return "https" if urlsplit(account_url).scheme.lower() != "http" else None


def _aware(moment: Any) -> datetime | None:
    """A policy's expiry as read back (a datetime or an ISO string) as an aware datetime."""
    if moment is None or isinstance(moment, datetime):
        return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(moment).replace("Z", "+00:00"))


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
