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
