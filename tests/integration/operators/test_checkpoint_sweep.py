"""The retention sweep against Azurite."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from airflow_kueue_provider.hooks.blob_store import BlobStoreHook
from airflow_kueue_provider.operators.sweep import KueueCheckpointSweepOperator

from .test_checkpointing import CONN_ID, blob  # noqa: F401 - the fixture

NAMES = [
    "d/r1/t/ledger.json",
    "d/r1/t/shards/0/checkpoint-00000001.json",
    "d/r2/t/ledger.json",
    "other/keep.json",
]


def test_sweep_deletes_only_stale_task_prefixes(blob: SimpleNamespace) -> None:  # noqa: F811
    with BlobStoreHook(CONN_ID, blob.container) as hook:
        hook.check()
        for name in NAMES:
            hook.write_json(name, {"x": 1})

        def sweep(older_than: timedelta, dry_run: bool = False) -> dict[str, object]:
            op = KueueCheckpointSweepOperator(
                task_id="sweep",
                checkpoint_conn_id=CONN_ID,
                container=blob.container,
                older_than=older_than,
                dry_run=dry_run,
            )
            return op.execute({})  # type: ignore[arg-type]

        assert sweep(timedelta(days=7))["prefixes"] == []
        assert sweep(timedelta(0), dry_run=True) == {
            "prefixes": ["d/r1/t", "d/r2/t"],
            "deleted_blobs": 0,
            "dry_run": True,
        }
        assert sweep(timedelta(0))["deleted_blobs"] == 3
        assert [n for n, _ in hook.list_names("")] == ["other/keep.json"]
