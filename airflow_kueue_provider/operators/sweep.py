"""``KueueCheckpointSweepOperator``: delete checkpoint prefixes older than a retention period."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..hooks.blob_store import BlobStoreHook
from ..kueue.retention import stale_prefixes

if TYPE_CHECKING:
    from airflow.sdk import Context


class KueueCheckpointSweepOperator(BaseOperator):
    """Remove every task instance's ledger and checkpoints whose newest blob is older than ``older_than``.

    Successful runs delete their shards' checkpoints themselves (unless kept); this sweep is the backstop for
    failed, abandoned or kept runs, e.g. in a daily maintenance DAG. ``dry_run`` only lists what would go.
    """

    template_fields: Sequence[str] = ("container",)

    def __init__(
        self,
        *,
        checkpoint_conn_id: str = "kueue_blob_default",
        container: str = "airflow-kueue",
        older_than: timedelta = timedelta(days=7),
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.checkpoint_conn_id = checkpoint_conn_id
        self.container = container
        self.older_than = older_than
        self.list_only = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> dict[str, Any]:
        with BlobStoreHook(self.checkpoint_conn_id, self.container, create_container=False) as hook:
            hook.check()
            stale = stale_prefixes(hook.list_names(""), datetime.now(timezone.utc), self.older_than)
            deleted = 0 if self.list_only else sum(hook.delete_prefix(f"{p}/") for p in stale)
        self.log.info(
            "%s %d prefixes older than %s (%d blobs) in %s",
            "would delete" if self.list_only else "deleted",
            len(stale),
            self.older_than,
            deleted,
            self.container,
        )
        return {"prefixes": stale, "deleted_blobs": deleted, "dry_run": self.list_only}
