"""``KueueCheckpointSweepOperator``: delete checkpoint prefixes older than a retention period."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..hooks.blob_store import BlobStoreHook
from ..kueue.retention import plan_sweep

if TYPE_CHECKING:
    from airflow.sdk import Context


class KueueCheckpointSweepOperator(BaseOperator):
    """Remove every task instance's ledger and checkpoints whose newest blob is older than ``older_than``.

    Only blobs of the provider's exact layout count (``<dag>/<run>/<task>[/<map>]/ledger.json`` and
    ``.../shards/<n>/...``), and each is deleted only if its ETag is still the one listed: a blob written
    since (a live retry's checkpoint) is kept. The result lists what went and what was kept.

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
            # 1. One listing decides: only names of the provider's exact layout, whole stale prefixes only.
            plan = plan_sweep(hook.list_blobs(""), datetime.now(timezone.utc), self.older_than)
            # 2. Delete exactly those names, each only if unchanged since the listing (its ETag).
            deleted, changed = ([], []) if self.list_only else hook.delete_unchanged(plan.delete)
        verb = "would delete" if self.list_only else "deleted"
        names = [b.name for b in plan.delete] if self.list_only else deleted
        self.log.info(
            "%s %d blobs of %d task-instance prefixes older than %s in %s: %s",
            verb,
            len(names),
            len(plan.stale_prefixes),
            self.older_than,
            self.container,
            ", ".join(names) or "none",
        )
        self.log.info(
            "kept %d prefixes with a blob newer than %s: %s; kept %d blobs written since the listing: %s",
            len(plan.kept_prefixes),
            self.older_than,
            ", ".join(plan.kept_prefixes) or "none",
            len(changed),
            ", ".join(changed) or "none",
        )
        return {
            "prefixes": list(plan.stale_prefixes),
            "deleted": names,
            "deleted_blobs": len(names),
            "kept_prefixes": list(plan.kept_prefixes),
            "kept_changed": changed,
            "dry_run": self.list_only,
        }
