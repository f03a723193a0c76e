"""``KueueCheckpointSweepOperator``: delete checkpoint prefixes older than a retention period."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..hooks.blob_containers import BlobAccountHook
from ..kueue.checkpoint_retention import BlobInfo, empty_containers_to_delete, plan_sweep, shard_blobs_of

if TYPE_CHECKING:
    from airflow.sdk import Context


class KueueCheckpointSweepOperator(BaseOperator):
    """Remove every task instance's ledger and checkpoints whose newest blob is older than ``older_than``.

    Only blobs of the provider's exact layout count (``<dag>/<run>/<task>[/<map>]/ledger.json`` in the base
    container, ``.../shards/<n>/...`` in the task instance's own shard container), and each is deleted only
    if its ETag is still the one listed: a blob written since (a live retry's checkpoint) is kept. A shard
    container goes once it is empty. The result lists what went and what was kept.

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
        now = datetime.now(timezone.utc)
        with BlobAccountHook(self.checkpoint_conn_id, self.container, create_container=False) as hook:
            hook.check()
            # 1. One listing decides: the base container's ledgers and each shard container's checkpoints,
            #    only names of the provider's exact layout, whole stale task instances only.
            containers = hook.shard_containers()
            blobs = list(hook.list_blobs(""))
            for name, (prefix, _) in containers.items():
                with hook.container_hook(name) as shards:
                    blobs += shard_blobs_of(name, prefix, shards.list_blobs(""))
            plan = plan_sweep(blobs, now, self.older_than)
            empty = empty_containers_to_delete(containers, plan, blobs, now, self.older_than)
            # 2. Delete exactly those names, each only if unchanged since the listing (its ETag); then the
            #    shard containers left empty.
            deleted: list[str] = []
            changed: list[str] = []
            gone: list[str] = []
            if not self.list_only:
                deleted, changed = self._delete(hook, plan.delete)
                gone = [name for name in empty if hook.delete_container_if_empty(name)]
        verb = "would delete" if self.list_only else "deleted"
        names = [_label(b) for b in plan.delete] if self.list_only else deleted
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
        self.log.info("%s %d empty shard containers: %s", verb, len(empty), ", ".join(empty) or "none")
        return {
            "prefixes": list(plan.stale_prefixes),
            "deleted_containers": empty if self.list_only else gone,
            "deleted": names,
            "deleted_blobs": len(names),
            "kept_prefixes": list(plan.kept_prefixes),
            "kept_changed": changed,
            "dry_run": self.list_only,
        }

    @staticmethod
    def _delete(hook: BlobAccountHook, blobs: Sequence[BlobInfo]) -> tuple[list[str], list[str]]:
        """Conditioned deletes, container by container; names come back as ``[<container>:]<blob>``."""
        deleted: list[str] = []
        changed: list[str] = []
        for container in sorted({b.container for b in blobs}, key=lambda c: c or ""):
            mine = [b for b in blobs if b.container == container]
            if container is None:
                went, kept = hook.delete_unchanged(mine)
            else:
                with hook.container_hook(container) as other:
                    went, kept = other.delete_unchanged(mine)
            label = "" if container is None else f"{container}:"
            deleted += [label + n for n in went]
            changed += [label + n for n in kept]
        return deleted, changed


def _label(blob: BlobInfo) -> str:
    return blob.name if blob.container is None else f"{blob.container}:{blob.name}"
