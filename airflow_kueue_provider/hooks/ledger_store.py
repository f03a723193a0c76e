"""Read and update a task instance's run ledger in Blob Storage with ETag-conditional writes.

An update reads the ledger and its ETag, applies the change, merges, and writes only if the ETag still
matches (or, for a new ledger, only if none exists yet). On a conflict it reads again and re-applies: two
writers (say, a trigger started twice) therefore never lose each other's shards, and two first tries that
both create the ledger end with the winner's ``container_salt`` (``RunLedger.merge`` keeps the first).

What a ``read`` or an ``update`` last saw (document and ETag) is kept for the next ``update``, which starts
from it instead of reading again (a first try's ledger checks and records cost one Blob GET, not three):
the write is conditioned on the kept ETag, so a ledger changed in between costs one 412 and a fresh read,
never a lost change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
        self._kept: tuple[dict[str, Any] | None, str | None] | None = None
        """What this store last read or wrote (document and ETag), for the next ``update`` to start from."""

    def _saw(self, ledger: RunLedger | None) -> RunLedger | None:
        if ledger is not None and self.salt is None:
            self.salt = (ledger.container_salt,)
        return ledger

    def read(self) -> RunLedger | None:
        data, etag = self.hook.read_json(self.name)
        self._kept = (data, etag)
        return self._saw(RunLedger.from_dict(data) if data else None)

    def _read_for_update(self) -> tuple[dict[str, Any] | None, str | None]:
        kept, self._kept = self._kept, None
        return kept if kept is not None else self.hook.read_json(self.name)

    def update(self, change: LedgerChange) -> RunLedger:
        for _ in range(MAX_CONFLICTS):
            data, etag = self._read_for_update()
            current = RunLedger.from_dict(data) if data else None
            updated = _apply(current, change)
            try:
                written = self.hook.write_json(
                    self.name, updated.to_dict(), if_match=etag, if_none_match=etag is None
                )
                self._saw(updated)
                self._kept = (updated.to_dict(), written) if isinstance(written, str) else None
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
