"""The trigger's ledger writes keep what the operator put in the ledger (pure parts)."""

from __future__ import annotations

import asyncio

from airflow_kueue_provider.hooks.ledger_store import _apply
from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.triggers.ledger_writer import LedgerWriter, Progress

SALT = "5a17" * 8


def test_the_triggers_progress_keeps_the_shard_containers_salt() -> None:
    """A retry finds its shard container through the ledger's salt: the trigger's writes must not drop it."""
    ledger = RunLedger(4, container_salt=SALT).with_attempt(Attempt(1, "j-1", IndexSet.range(0, 4)))

    async def write() -> RunLedger:
        writer = LedgerWriter({"conn_id": "blob", "container": "ckpt", "prefix": "d/r/t"}, "j-1")
        try:
            progress = Progress(IndexSet.parse("0-1"), IndexSet(), 0)
            return _apply(ledger, lambda current: writer._apply(current, progress=progress))
        finally:
            await writer.close()

    written = asyncio.run(write())
    assert str(written.completed) == "0,1" and written.container_salt == SALT
    assert RunLedger.from_dict(written.to_dict()).container_salt == SALT


class _CountingStore:
    """Stands in for the Blob ledger store: counts the writes and keeps what each one wrote."""

    def __init__(self) -> None:
        self.written: list[str] = []

    async def update(self, apply: object) -> None:
        ledger = RunLedger(10).with_attempt(Attempt(1, "j-1", IndexSet.range(0, 10)))
        self.written.append(str(apply(ledger).completed))  # type: ignore[operator]


def test_progress_is_written_at_most_once_an_interval_and_a_flush_writes_at_once() -> None:
    """A Job's pods end one after another: one write per interval, not per pod; the end is not delayed."""

    async def run() -> list[str]:
        writer = LedgerWriter({"conn_id": "blob", "container": "c", "prefix": "p"}, "j-1", interval=30.0)
        store = _CountingStore()

        async def opened() -> _CountingStore:
            return store

        writer._open = opened  # type: ignore[method-assign,assignment]
        try:
            writer.offer(Progress(IndexSet.parse("0"), IndexSet(), 0))
            await asyncio.sleep(0.05)  # the first progress is written at once
            for done in ("0-1", "0-2", "0-3"):  # ... the next ones wait out the interval, the newest kept
                writer.offer(Progress(IndexSet.parse(done), IndexSet(), 0))
                await asyncio.sleep(0.05)
            assert store.written == ["0"]
            assert await writer.flush(5.0), "a flush writes the newest progress without the interval"
            return store.written
        finally:
            await writer.close()

    assert asyncio.run(run()) == ["0", "0-3"]
