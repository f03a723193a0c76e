"""``KueueFinishedJobSweepOperator``: delete the provider's finished Jobs older than a retention period."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..hooks.kueue_hook import KueueHook
from ..kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from ..kueue.progress.finished_job_retention import stale_finished_jobs

if TYPE_CHECKING:
    from airflow.sdk import Context


class KueueFinishedJobSweepOperator(BaseOperator):
    """Delete finished (Complete or Failed) Jobs this provider submitted, once older than ``older_than``.

    ``ttlSecondsAfterFinished`` does this per Job; the sweep is the backstop for Jobs submitted with the TTL
    off, or when a shorter retention is wanted, e.g. in a daily maintenance DAG. It only touches Jobs labelled
    ``app.kubernetes.io/managed-by=airflow-kueue-provider``, never a queued or running one, and deletes with
    background propagation so the garbage collector removes their pods and Kueue Workloads too.
    ``namespace=None`` sweeps every namespace (needs cluster-wide list on Jobs). ``dry_run`` only lists.
    """

    template_fields: Sequence[str] = ("namespace",)

    def __init__(
        self,
        *,
        kubernetes_conn_id: str = "kubernetes_default",
        namespace: str | None = None,
        older_than: timedelta = timedelta(days=1),
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kubernetes_conn_id = kubernetes_conn_id
        self.namespace = namespace
        self.older_than = older_than
        self.list_only = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> dict[str, Any]:
        hook = KueueHook(self.kubernetes_conn_id)
        jobs = hook.find_jobs(self.namespace, {MANAGED_BY_LABEL: MANAGED_BY_VALUE})
        stale = stale_finished_jobs(jobs, datetime.now(UTC), self.older_than)
        deleted = (
            []
            if self.list_only
            else [job for job in stale if hook.delete_job(job.namespace, job.name, uid=job.uid)]
        )
        self.log.info(
            "%s %d finished Jobs older than %s in %s: %s",
            "would delete" if self.list_only else "deleted",
            len(stale) if self.list_only else len(deleted),
            self.older_than,
            self.namespace or "all namespaces",
            ", ".join(map(str, stale)) or "none",
        )
        return {
            "jobs": [str(job) for job in stale],
            "deleted": len(deleted),
            "dry_run": self.list_only,
        }
