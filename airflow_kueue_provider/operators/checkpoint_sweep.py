"""``KueueCheckpointSweepOperator``: delete checkpoint prefixes older than a retention period."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..airflow_compat import AirflowFailException
from ..hooks.blob_containers import BlobAccountHook
from ..hooks.kueue_hook import KueueHook
from ..hooks.ledger_store import LedgerStore
from ..kueue.checkpoints.checkpoint_access import is_finished
from ..kueue.checkpoints.checkpoint_retention import (
    BlobInfo,
    check_older_than,
    empty_containers_to_delete,
    is_orphan,
    maybe_orphans,
    plan_sweep,
    shard_blobs_of,
)
from ..kueue.checkpoints.ledger import RunLedger, ledger_prefix
from ..kueue.identity.airflow_identity import identity_of
from ..kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from ..storage.blob_errors import BlobStoreError

if TYPE_CHECKING:
    from airflow.sdk import Context


class KueueCheckpointSweepOperator(BaseOperator):
    """Remove every task instance's ledger and checkpoints whose newest blob is older than ``older_than``.

    Only blobs of the provider's exact layout count (``<dag>/<run>/<task>[/<map>]/ledger.json`` in the base
    container, ``.../shards/<n>/...`` in the task instance's own shard container), and each is deleted only
    if its ETag is still the one listed: a blob written since (a live retry's checkpoint) is kept. A shard
    container goes once it is empty. The result lists what went and what was kept.

    Blob times cannot tell a queued Job (it writes nothing) from an abandoned one, so a prefix is never swept
    while its ledger has a running attempt or an unfinished Job of the provider belongs to it (Jobs listed in
    ``namespace``, every namespace when None: the sweeper's identity needs ``list`` on Jobs there, see
    ``deploy/rbac/job-sweeper.yaml``). A shard container goes only if empty and unmodified since the listing
    (a new attempt's access policy modifies it). One whose salt is not its ledger's (the ledger was made anew,
    and with it a new container) is an orphan: it goes with its old checkpoints, unless the run is live.

    Successful runs delete their shards' checkpoints themselves (unless kept); this sweep is the backstop for
    failed, abandoned or kept runs, e.g. in a daily maintenance DAG. ``dry_run`` (the default) only lists what
    would go: set ``dry_run=False`` to delete. ``older_than`` is at least one day.
    """

    template_fields: Sequence[str] = ("container",)

    def __init__(
        self,
        *,
        checkpoint_conn_id: str = "kueue_blob_default",
        container: str = "airflow-kueue",
        older_than: timedelta = timedelta(days=7),
        dry_run: bool = True,
        kubernetes_conn_id: str = "kubernetes_default",
        namespace: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        try:
            self.older_than = check_older_than(older_than)
        except ValueError as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        self.checkpoint_conn_id = checkpoint_conn_id
        self.container = container
        self.list_only = dry_run  # BaseOperator.dry_run is a method
        self.kubernetes_conn_id = kubernetes_conn_id
        self.namespace = namespace

    @staticmethod
    def _now() -> datetime:
        return datetime.now(UTC)

    def _live_job_prefixes(self) -> dict[str, str]:
        """prefix -> why, for every unfinished Job of the provider (its identity annotations say whose)."""
        jobs = KueueHook(self.kubernetes_conn_id).find_jobs(
            self.namespace, {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
        )
        live: dict[str, str] = {}
        for job in jobs:
            identity = identity_of(job)
            if identity is not None and not is_finished(job):
                prefix = ledger_prefix(identity.dag_id, identity.run_id, identity.task_id, identity.map_index)
                live[prefix] = f"Job {job['metadata'].get('namespace')}/{job['metadata']['name']} is live"
        return live

    def _ledgers(self, hook: BlobAccountHook, prefixes: Iterable[str]) -> dict[str, RunLedger | None]:
        """prefix -> its ledger (None: there is none) for each of ``prefixes`` whose ledger is readable."""
        ledgers: dict[str, RunLedger | None] = {}
        for prefix in sorted(set(prefixes)):
            try:
                ledgers[prefix] = LedgerStore(hook, prefix).read()
            except (BlobStoreError, ValueError, KeyError, TypeError, AttributeError) as exc:
                self.log.warning("ledger of %s unreadable (%s): it protects nothing", prefix, exc)
        return ledgers

    @staticmethod
    def _running_attempts(ledgers: dict[str, RunLedger | None]) -> dict[str, str]:
        """prefix -> why, for each prefix whose ledger has an attempt still running."""
        running: dict[str, str] = {}
        for prefix, ledger in ledgers.items():
            jobs = [a.job_name for a in (ledger.attempts if ledger else ()) if a.status == "running"]
            if jobs:
                running[prefix] = f"the ledger has a running attempt ({', '.join(jobs)})"
        return running

    def execute(self, context: Context) -> dict[str, Any]:
        now = self._now()
        live = self._live_job_prefixes()
        with BlobAccountHook(self.checkpoint_conn_id, self.container, create_container=False) as hook:
            hook.check()
            # 1. One listing decides: the base container's ledgers and each shard container's checkpoints,
            #    only names of the provider's exact layout, whole stale task instances only.
            #    A container that is not its ledger's (another salt: the ledger was made anew) is an
            #    orphan, weighed on its own: only old containers of kept prefixes need their ledger read.
            containers = hook.shard_containers()
            blobs = list(hook.list_blobs(""))
            for name, container in containers.items():
                with hook.container_hook(name) as shards:
                    blobs += shard_blobs_of(name, container.prefix, shards.list_blobs(""))
            candidates = plan_sweep(blobs, now, self.older_than).stale_prefixes
            maybe = maybe_orphans(containers, candidates, blobs, now, self.older_than)
            ledgers = self._ledgers(hook, [*candidates, *(containers[n].prefix for n in maybe)])
            orphans = {
                n: containers[n]
                for n in maybe
                if containers[n].prefix in ledgers
                and (ledger := ledgers[containers[n].prefix]) is not None
                and is_orphan(containers[n], ledger.container_salt)
            }
            protected = {**self._running_attempts(ledgers), **live}
            plan = plan_sweep(blobs, now, self.older_than, protected, orphans)
            empty = empty_containers_to_delete(containers, plan, blobs, now, self.older_than)
            # 2. Delete exactly those names, each only if unchanged since the listing (its ETag); then the
            #    shard containers left empty.
            deleted: list[str] = []
            changed: list[str] = []
            gone: list[str] = []
            if not self.list_only:
                deleted, changed = self._delete(hook, plan.delete)
                gone = [
                    name for name in empty if hook.delete_container_if_empty(name, containers[name].modified)
                ]
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
        self.log.info(
            "%s %d orphan shard containers (not their ledger's): %s",
            verb,
            len(plan.orphaned),
            ", ".join(plan.orphaned) or "none",
        )
        old = [f"{p} ({why})" for p, why in plan.protected if p in candidates]
        self.log.info("kept %d old prefixes whose Job may still run: %s", len(old), ", ".join(old) or "none")
        return {
            "prefixes": list(plan.stale_prefixes),
            "deleted_containers": empty if self.list_only else gone,
            "orphaned_containers": list(plan.orphaned),
            "deleted": names,
            "deleted_blobs": len(names),
            "kept_prefixes": list(plan.kept_prefixes),
            "kept_changed": changed,
            "kept_protected": {p: why for p, why in plan.protected if p in candidates},
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
