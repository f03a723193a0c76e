"""Keep the run ledger current from the trigger, without ever blocking or failing the trigger.

``offer`` stores the newest progress and returns at once; a background task writes it (an ETag-conditional
merge), at most once every ``WRITE_INTERVAL`` seconds: a Job's pods end one after another and each moved the
progress, so a write per pod was a Blob GET and PUT per shard in the triggerer, its busiest work on a night of
thousands of shards. ``flush`` (the Job's end) writes at once. What the interval delays is only this view of a
running Job: the Job's status says which indexes completed, and the operator records the end itself. When
Blob Storage is unreachable the writer keeps the newest progress and retries with backoff, so
the ledger catches up as soon as storage is back; the task's outcome never depends on it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import random
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.index_set import IndexSet

if TYPE_CHECKING:  # imported in a worker thread by LedgerWriter._open(): azure is ~0.2 s to import
    from ..hooks.blob_store import AsyncBlobStoreHook
    from ..hooks.ledger_store import AsyncLedgerStore

log = logging.getLogger(__name__)
MAX_BACKOFF = 30.0
WRITE_INTERVAL = 10.0
"""Seconds between two progress writes of one Job (``flush`` does not wait for it)."""


@dataclass(frozen=True)
class Progress:
    completed: IndexSet
    failed: IndexSet
    evictions: int
    status: str = "running"


class LedgerWriter:
    def __init__(self, config: dict[str, Any], job_name: str, interval: float = WRITE_INTERVAL) -> None:
        self.job_name = job_name
        self._interval = interval
        self._config = config
        self._hook: AsyncBlobStoreHook | None = None
        self._store: AsyncLedgerStore | None = None
        self._pending: Progress | None = None
        self._written: Progress | None = None
        self._wake = asyncio.Event()
        self._now = asyncio.Event()  # flush: end the interval's wait
        self._idle = asyncio.Event()
        self._idle.set()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"ledger-{job_name}")

    def offer(self, progress: Progress) -> None:
        if progress == self._written or progress == self._pending:
            return
        self._pending = progress
        self._idle.clear()
        self._wake.set()

    async def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the newest progress to be written (at once, not after the
        interval); True if it was."""
        self._now.set()
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        return self._idle.is_set()

    async def close(self) -> None:
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task
        if self._hook is not None:
            await self._hook.close()

    async def _open(self) -> AsyncLedgerStore:
        """The ledger store, its Blob client libraries imported in a worker thread (never on the triggerer's
        event loop, which runs every trigger of the process)."""
        if self._store is None:
            name = "airflow_kueue_provider.hooks.ledger_store"
            ledger_store = await asyncio.to_thread(importlib.import_module, name)
            config = self._config
            self._hook = ledger_store.AsyncBlobStoreHook(
                config["conn_id"], config["container"], create_container=False
            )
            self._store = ledger_store.AsyncLedgerStore(self._hook, config["prefix"])
        return self._store

    async def _run(self) -> None:
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            progress = self._pending
            if progress is None:
                continue
            try:
                store = await self._open()
                await store.update(functools.partial(self._apply, progress=progress))
            except asyncio.CancelledError:
                raise
            except LookupError as exc:  # nothing to record into (the Job predates checkpointing): stop trying
                log.info("not recording progress: %s", exc)
                self._pending = None
                self._idle.set()
                continue
            except Exception as exc:
                failures += 1
                delay = random.uniform(0.5, min(MAX_BACKOFF, 2.0**failures))
                log.warning("ledger write for %s failed (%s); retrying in %.1fs", self.job_name, exc, delay)
                await asyncio.sleep(delay)
                self._wake.set()  # retry with whatever is newest by then
                continue
            failures = 0
            self._written = progress
            if self._pending == progress:
                self._pending = None
                self._idle.set()
            if not self._now.is_set():  # the next write waits out the interval, unless a flush comes
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._now.wait(), self._interval)

    def _apply(self, current: RunLedger | None, *, progress: Progress) -> RunLedger:
        if current is None or current.attempt(self.job_name) is None:
            raise LookupError(f"the ledger has no attempt for Job {self.job_name}")
        return current.with_job_progress(
            self.job_name,
            progress.completed,
            progress.failed,
            evictions=progress.evictions,
            status=progress.status,
        )
