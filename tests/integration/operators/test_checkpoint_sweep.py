"""The retention sweep against Azurite: only the provider's exact layout, only what one listing decided,
each blob only if unchanged since."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.hooks.blob_containers import BlobAccountHook
from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from airflow_kueue_provider.kueue.checkpoint_access import shard_container_name
from airflow_kueue_provider.kueue.checkpoint_retention import BlobInfo
from airflow_kueue_provider.kueue.ledger import ledger_prefix
from airflow_kueue_provider.operators.checkpoint_sweep import KueueCheckpointSweepOperator

from .conftest import CONN_ID

SHARDS_TASK = ledger_prefix("genomics", "scheduled__2026-11-01", "shards")  # a task whose id is "shards"
OTHER_TASK = ledger_prefix("genomics", "scheduled__2026-11-01", "report")
LIVE_RETRY = ledger_prefix("genomics", "scheduled__2026-11-02", "align", 3)
ABANDONED = ledger_prefix("genomics", "scheduled__2026-11-03", "align")
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
    ledgers = [f"{p}/ledger.json" for p in (SHARDS_TASK, OTHER_TASK, LIVE_RETRY)]
    shards = {  # each task instance's checkpoints live in its own shard container
        SHARDS_TASK: [f"{SHARDS_TASK}/shards/0/checkpoint-00000001.json"],
        LIVE_RETRY: [f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json"],
        ABANDONED: [],  # a container whose pods never wrote (and no ledger)
    }
    live = shard_container_name(blob.container, LIVE_RETRY)
    foreign_container = f"{blob.container}-results"
    blob.service.create_container(foreign_container).upload_blob(f"{SHARDS_TASK}/shards/0/x.json", b"{}")
    with BlobAccountHook(CONN_ID, blob.container) as hook:
        hook.check()
        for name in ledgers + FOREIGN:
            hook.write_json(name, {"x": 1})
        for prefix, names in shards.items():
            hook.ensure_container(shard_container_name(blob.container, prefix), prefix)
            with hook.container_hook(shard_container_name(blob.container, prefix)) as container:
                for name in names:
                    container.write_json(name, {"x": 1})
        with hook.container_hook(live) as container:  # a pod may write any name in its own container:
            container.write_json(f"{OTHER_TASK}/shards/0/checkpoint-00000009.json", {"x": 1})  # not counted

        assert _sweep(blob.container, timedelta(days=7))["prefixes"] == [], "nothing is old enough"
        dry = _sweep(blob.container, timedelta(0), dry_run=True)
        assert dry["prefixes"] == sorted([SHARDS_TASK, OTHER_TASK, LIVE_RETRY])
        expected = ledgers + [
            f"{shard_container_name(blob.container, p)}:{n}" for p, ns in shards.items() for n in ns
        ]
        assert sorted(dry["deleted"]) == sorted(expected), (
            "foreign blobs and containers are not the provider's"
        )

        # A live retry writes while the sweep runs: right after the sweep listed its container it rewrites a
        # checkpoint it had and adds a new one.
        listed = BlobStoreHook.list_blobs

        def list_then_retry_writes(self: BlobStoreHook, prefix: str) -> list[BlobInfo]:
            items = listed(self, prefix)
            if self.container == live:
                self.write_json(f"{LIVE_RETRY}/shards/7/checkpoint-00000001.json", {"x": 2})
                self.write_json(f"{LIVE_RETRY}/shards/7/checkpoint-00000002.json", {"x": 3})
            return items

        monkeypatch.setattr(BlobStoreHook, "list_blobs", list_then_retry_writes)
        result = _sweep(blob.container, timedelta(0))
        monkeypatch.undo()

        assert result["kept_changed"] == [f"{live}:{LIVE_RETRY}/shards/7/checkpoint-00000001.json"]
        assert sorted(n for n, _ in hook.list_names("")) == sorted(FOREIGN), "the ledgers went, nothing else"
        with hook.container_hook(live) as container:
            assert sorted(n for n, _ in container.list_names("")) == sorted(
                [f"{OTHER_TASK}/shards/0/checkpoint-00000009.json"]
                + [f"{LIVE_RETRY}/shards/7/checkpoint-0000000{n}.json" for n in (1, 2)]
            ), "what the retry wrote since the listing is kept, and so is its container"
        containers = {c.name for c in blob.service.list_containers(name_starts_with=blob.container)}
        assert containers == {blob.container, live, foreign_container}
        assert sorted(result["deleted_containers"]) == sorted(
            shard_container_name(blob.container, p) for p in (SHARDS_TASK, ABANDONED)
        )
