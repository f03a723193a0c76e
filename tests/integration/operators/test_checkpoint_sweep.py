"""The retention sweep against Azurite: only the provider's exact layout, only what one listing decided,
each blob only if unchanged since."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from airflow_kueue_provider.kueue.ledger import ledger_prefix
from airflow_kueue_provider.kueue.retention import BlobInfo
from airflow_kueue_provider.operators.sweep import KueueCheckpointSweepOperator

from .test_checkpointing import CONN_ID
from .test_checkpointing import blob as blob  # the fixture

SHARDS_TASK = ledger_prefix("genomics", "scheduled__2026-11-01", "shards")  # a task whose id is "shards"
OTHER_TASK = ledger_prefix("genomics", "scheduled__2026-11-01", "report")
LIVE_RETRY = ledger_prefix("genomics", "scheduled__2026-11-02", "align", 3)
FOREIGN = ["results/genome/shards/x.bam", "notes.txt", "a/b/c/d/ledger.json.bak"]


def _sweep(container: str, older_than: timedelta, dry_run: bool = False) -> dict[str, Any]:
    op = KueueCheckpointSweepOperator(
        task_id="sweep",
        checkpoint_conn_id=CONN_ID,
        container=container,
        older_than=older_than,
        dry_run=dry_run,
    )
    return op.execute({})  # type: ignore[arg-type]


def test_only_expired_provider_blobs_go_and_a_live_retry_keeps_what_it_writes(
    blob: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = [
        f"{SHARDS_TASK}/ledger.json",
        f"{SHARDS_TASK}/shards/0/checkpoint-00000001.json",
        f"{OTHER_TASK}/ledger.json",
        f"{LIVE_RETRY}/ledger.json",
        f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json",
    ]
    with BlobStoreHook(CONN_ID, blob.container) as hook:
        hook.check()
        for name in ours + FOREIGN:
            hook.write_json(name, {"x": 1})

        assert _sweep(blob.container, timedelta(days=7))["prefixes"] == [], "nothing is old enough"
        dry = _sweep(blob.container, timedelta(0), dry_run=True)
        assert dry["prefixes"] == sorted([SHARDS_TASK, OTHER_TASK, LIVE_RETRY])
        assert sorted(dry["deleted"]) == sorted(ours), "the foreign blobs are not the provider's"

        # A live retry writes while the sweep runs: right after the sweep's one listing it rewrites a
        # checkpoint it had and adds a new one.
        listed = BlobStoreHook.list_blobs

        def list_then_retry_writes(self: BlobStoreHook, prefix: str) -> list[BlobInfo]:
            items = listed(self, prefix)
            hook.write_json(f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json", {"x": 2})
            hook.write_json(f"{LIVE_RETRY}/shards/7/checkpoint-00000002.json", {"x": 3})
            return items

        monkeypatch.setattr(BlobStoreHook, "list_blobs", list_then_retry_writes)
        result = _sweep(blob.container, timedelta(0))

        assert result["kept_changed"] == [f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json"]
        left = sorted(n for n, _ in hook.list_names(""))
        retry_wrote = [f"{LIVE_RETRY}/shards/7/checkpoint-0000000{n}.json" for n in (1, 2)]
        assert left == sorted([*FOREIGN, *retry_wrote])
        assert sorted(result["deleted"]) == sorted(
            set(ours) - {f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json"}
        )
