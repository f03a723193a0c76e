"""Read and update a task instance's run ledger in Blob Storage with ETag-conditional writes.

An update reads the ledger and its ETag, applies the change, merges, and writes only if the ETag still
matches (or, for a new ledger, only if none exists yet). On a conflict it reads again and re-applies: two
writers (say, a trigger started twice) therefore never lose each other's shards, and two first tries that
both create the ledger end with the winner's ``container_salt`` (``RunLedger.merge`` keeps the first).
"""

from __future__ import annotations

from collections.abc import Callable

from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.errors import KueueProviderError
from .blob_store import AsyncBlobStoreHook, BlobPreconditionFailed, BlobStoreHook

LEDGER_NAME = "ledger.json"
MAX_CONFLICTS = 20

LedgerChange = Callable[[RunLedger | None], RunLedger]


class LedgerConflict(RuntimeError, KueueProviderError):
    """Every conditional write of the ledger lost to a concurrent one, MAX_CONFLICTS times in a row."""


def ledger_blob(prefix: str) -> str:
    return f"{prefix}/{LEDGER_NAME}"


def _apply(current: RunLedger | None, change: LedgerChange) -> RunLedger:
    updated = change(current)
    return current.merge(updated) if current is not None else updated


class LedgerStore:
    def __init__(self, hook: BlobStoreHook, prefix: str) -> None:
        self.hook = hook
        self.name = ledger_blob(prefix)
        self.salt: tuple[str | None] | None = None
        """``(container_salt,)`` of the first ledger this store read or wrote (None before): the shard
        container its user keeps to, even if the ledger is deleted and made anew meanwhile."""

    def _saw(self, ledger: RunLedger | None) -> RunLedger | None:
        if ledger is not None and self.salt is None:
            self.salt = (ledger.container_salt,)
        return ledger

    def read(self) -> RunLedger | None:
        data, _ = self.hook.read_json(self.name)
        return self._saw(RunLedger.from_dict(data) if data else None)

    def update(self, change: LedgerChange) -> RunLedger:
        for _ in range(MAX_CONFLICTS):
            data, etag = self.hook.read_json(self.name)
            current = RunLedger.from_dict(data) if data else None
            updated = _apply(current, change)
            try:
                self.hook.write_json(self.name, updated.to_dict(), if_match=etag, if_none_match=etag is None)
                self._saw(updated)
                return updated
            except BlobPreconditionFailed:
                continue  # somebody wrote in between: read their version and apply the change again
        raise LedgerConflict(f"ledger {self.name} kept changing under {MAX_CONFLICTS} concurrent writes")


class AsyncLedgerStore:
    def __init__(self, hook: AsyncBlobStoreHook, prefix: str) -> None:
        self.hook = hook
        self.name = ledger_blob(prefix)

    async def update(self, change: LedgerChange) -> RunLedger:
        for _ in range(MAX_CONFLICTS):
            data, etag = await self.hook.read_json(self.name)
            current = RunLedger.from_dict(data) if data else None
            updated = _apply(current, change)
            try:
                await self.hook.write_json(
                    self.name, updated.to_dict(), if_match=etag, if_none_match=etag is None
                )
                return updated
            except BlobPreconditionFailed:
                continue
        raise LedgerConflict(f"ledger {self.name} kept changing under {MAX_CONFLICTS} concurrent writes")
