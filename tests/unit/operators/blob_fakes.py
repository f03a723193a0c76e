"""In-memory stand-ins for what the checkpoint session's parts use of Blob Storage: no network, every call
recorded (shared by the unit tests of ``operators/checkpointing`` and its parts)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from types import SimpleNamespace, TracebackType
from typing import Any

from airflow_kueue_provider.hooks.ledger_store import LedgerStore
from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.checkpoint_config import Checkpointing
from airflow_kueue_provider.operators.checkpoint_place import CheckpointPlace
from airflow_kueue_provider.storage.blob_errors import BlobPreconditionFailed


class MemoryBlobs:
    """What a ledger store uses of its Blob hook (JSON reads and ETag-conditioned writes), in memory."""

    def __init__(self) -> None:
        self.blobs: dict[str, tuple[dict[str, Any], str]] = {}
        self.writes = 0
        self.reads = 0

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        self.reads += 1
        doc, etag = self.blobs.get(name, (None, None))
        return copy.deepcopy(doc), etag

    def write_json(
        self, name: str, data: dict[str, Any], if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        _, etag = self.blobs.get(name, (None, None))
        if (if_none_match and etag) or (if_match and etag != if_match):
            raise BlobPreconditionFailed(name)
        self.writes += 1
        self.blobs[name] = (copy.deepcopy(data), f"etag-{self.writes}")
        return f"etag-{self.writes}"


class ShardContainer:
    """A shard container's blob names (what ``container_hook`` lists and deletes)."""

    def __init__(self, names: list[str], error: Exception | None = None) -> None:
        self.names, self.error = names, error

    def __enter__(self) -> ShardContainer:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        return None

    def list_names(self, prefix: str) -> list[tuple[str, datetime]]:
        if self.error is not None:
            raise self.error
        return [(n, datetime.now(UTC)) for n in self.names if n.startswith(prefix)]

    def delete_prefix(self, prefix: str) -> int:
        gone = [n for n in self.names if n.startswith(prefix)]
        self.names = [n for n in self.names if n not in gone]
        return len(gone)


class AccountHook:
    """The account hook's container and access-policy calls, recorded (account key: SAS bound to policies)."""

    def __init__(self, binds_sas_to_policy: bool = True, shards: ShardContainer | None = None) -> None:
        self.binds_sas_to_policy = binds_sas_to_policy
        self.shards = shards or ShardContainer([])
        self.calls: list[tuple[str, str]] = []
        self.revoke_error: Exception | None = None

    def get_auth(self) -> SimpleNamespace:
        return SimpleNamespace(account_url="https://acct.blob.core.windows.net/")

    def ensure_container(self, name: str, prefix: str, salt: str | None = None) -> None:
        self.calls.append(("ensure", name))

    def container_sas(self, name: str, start: object, expiry: object, policy: str | None = None) -> str:
        self.calls.append(("grant", str(policy)))
        return f"sv=x&si={policy}&sig=y" if policy else "sv=x&sig=y"

    def extend_access(self, name: str, head: str, start: object, expiry: object) -> int:
        self.calls.append(("extend", head))
        return 1

    def revoke_access(self, name: str, head: str) -> int:
        self.calls.append(("revoke", head))
        if self.revoke_error is not None:
            raise self.revoke_error
        return 1

    def container_hook(self, name: str) -> ShardContainer:
        self.calls.append(("open", name))
        return self.shards

    def delete_container_if_empty(self, name: str) -> bool:
        self.calls.append(("delete container", name))
        return True


def place(
    hook: AccountHook | None = None,
    config: Checkpointing | None = None,
    shard_count: int = 4,
    blobs: MemoryBlobs | None = None,
) -> CheckpointPlace:
    """A place for task instance d/r/t over ``hook`` and an in-memory ledger."""
    store = LedgerStore(blobs or MemoryBlobs(), "d/r/t")  # type: ignore[arg-type]
    return CheckpointPlace(
        config or Checkpointing("blob", "ckpt"),
        "d/r/t",
        hook or AccountHook(),  # type: ignore[arg-type]
        store,
        shard_count,
    )


def done_markers(shards: IndexSet, prefix: str = "d/r/t") -> list[str]:
    """The done marker names of ``shards`` (as the worker SDK writes them)."""
    return [done_name(prefix, i) for i in shards]
