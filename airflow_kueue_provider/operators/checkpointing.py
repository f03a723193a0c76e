"""Blob checkpoints and the run ledger, as the operator uses them (orchestration over the Blob hooks).

With checkpointing on, a task instance's shards are numbered 0..completions-1 and its ledger records which
finished. The first try runs them all; a later try runs only the unfinished ones, in a Job whose index ``i``
runs the ``i``-th of them (the pod learns its shard from ``AIRFLOW_KUEUE_SHARDS`` and the worker SDK).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..hooks.blob_store import BlobStoreHook
from ..hooks.ledger_store import LedgerStore
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.job_progress import view_of
from ..kueue.ledger import Attempt, RunLedger, ledger_prefix
from ..kueue.result import JobResult

SHARDS_ENV = "AIRFLOW_KUEUE_SHARDS"
CHECKPOINT_URL_ENV = "AIRFLOW_KUEUE_CHECKPOINT_URL"
CHECKPOINT_PREFIX_ENV = "AIRFLOW_KUEUE_CHECKPOINT_PREFIX"
GRACE_ENV = "AIRFLOW_KUEUE_GRACE_SECONDS"
CONNECTION_STRING_ENV = "AZURE_STORAGE_CONNECTION_STRING"
WORKLOAD_IDENTITY_LABEL = "azure.workload.identity/use"


@dataclass(frozen=True)
class Checkpointing:
    """Where shards checkpoint and how their pods reach it.

    :param conn_id: the Blob connection (``wasb``-style fields: connection string, account URL + workload
        identity / managed identity, SAS token).
    :param credentials_secret: a Kubernetes Secret (in the Job's namespace) whose ``credentials_secret_key``
        holds a connection string for the pods; it reaches them as a secretKeyRef, never as a literal value.
        Leave it unset on AKS with workload identity and set ``workload_identity_service_account``.
    """

    conn_id: str
    container: str = "airflow-kueue"
    create_container: bool = True
    credentials_secret: str | None = None
    credentials_secret_key: str = "connection-string"
    workload_identity_service_account: str | None = None
    keep_after_success: bool = False

    @classmethod
    def from_param(cls, value: Checkpointing | dict[str, Any] | str | None) -> Checkpointing | None:
        if value is None or isinstance(value, Checkpointing):
            return value
        if isinstance(value, str):
            return cls(conn_id=value)
        return cls(**value)


class CheckpointSession:
    """One task try's view of its checkpoints and ledger."""

    def __init__(self, config: Checkpointing, identity: AirflowIdentity, shard_count: int) -> None:
        self.config = config
        self.identity = identity
        self.shard_count = shard_count
        self.prefix = ledger_prefix(identity.dag_id, identity.run_id, identity.task_id, identity.map_index)
        self.hook = BlobStoreHook(config.conn_id, config.container, create_container=config.create_container)
        self.ledger = LedgerStore(self.hook, self.prefix)

    def check(self) -> None:
        """Fail fast (BlobConfigError) on an unknown connection, bad credentials or a missing container."""
        self.hook.check()

    def reconcile(self, jobs: list[dict[str, Any]]) -> RunLedger:
        """The ledger, caught up with what earlier attempts' Jobs report (a write may have been missed)."""

        def catch_up(current: RunLedger | None) -> RunLedger:
            ledger = current or RunLedger(self.shard_count)
            for job in jobs:
                name = job["metadata"]["name"]
                if ledger.attempt(name) is None:
                    continue
                view = view_of(job, None)
                ending = (view.finished_condition or {}).get("type")
                status = {"Complete": "succeeded", "Failed": "failed"}.get(str(ending), "running")
                ledger = ledger.with_job_progress(name, view.completed, view.failed, status=status)
            return ledger

        return self.ledger.update(catch_up)

    def record_attempt(self, job_name: str, shards: IndexSet) -> RunLedger:
        attempt = Attempt(
            self.identity.try_number,
            job_name,
            shards,
            started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        return self.ledger.update(
            lambda current: (current or RunLedger(self.shard_count)).with_attempt(attempt)
        )

    @staticmethod
    def job_shards(job: dict[str, Any], default: IndexSet) -> IndexSet:
        """The shards a Job was created for (its ``AIRFLOW_KUEUE_SHARDS``), or ``default``."""
        for container in job["spec"]["template"]["spec"]["containers"]:
            for var in container.get("env") or []:
                if var.get("name") == SHARDS_ENV and "value" in var:
                    return IndexSet.parse(var["value"])
        return default

    def trigger_ledger(self) -> dict[str, Any]:
        """What the trigger needs to keep the ledger current while the Job runs."""
        return {
            "conn_id": self.config.conn_id,
            "container": self.config.container,
            "prefix": self.prefix,
            "shard_count": self.shard_count,
        }

    def pod_env(self, shards: IndexSet, termination_grace: int = 30) -> list[dict[str, Any]]:
        env: list[dict[str, Any]] = [
            {"name": SHARDS_ENV, "value": str(shards)},
            {"name": CHECKPOINT_URL_ENV, "value": self.hook.container_url()},
            {"name": CHECKPOINT_PREFIX_ENV, "value": self.prefix},
            # The SDK's SIGTERM flush must end before the kubelet's SIGKILL: 5 s short of the pod's grace.
            {"name": GRACE_ENV, "value": str(max(1, termination_grace - 5))},
        ]
        if self.config.credentials_secret:
            env.append(
                {
                    "name": CONNECTION_STRING_ENV,
                    "valueFrom": {
                        "secretKeyRef": {
                            "name": self.config.credentials_secret,
                            "key": self.config.credentials_secret_key,
                        }
                    },
                }
            )
        return env

    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """Run exactly ``shards`` (completions = their count) and tell each pod where to checkpoint."""
        spec = manifest["spec"]
        spec["completions"] = len(shards)
        spec["parallelism"] = min(int(spec.get("parallelism") or len(shards)), len(shards))
        if spec.get("maxFailedIndexes") is not None:
            spec["maxFailedIndexes"] = min(int(spec["maxFailedIndexes"]), len(shards))
        pod = spec["template"]
        env = self.pod_env(shards, int(pod["spec"].get("terminationGracePeriodSeconds") or 30))
        names = {e["name"] for e in env}
        for container in pod["spec"]["containers"]:
            container["env"] = [e for e in container.get("env") or [] if e["name"] not in names] + env
        if self.config.workload_identity_service_account:
            pod["spec"]["serviceAccountName"] = self.config.workload_identity_service_account
            pod.setdefault("metadata", {}).setdefault("labels", {})[WORKLOAD_IDENTITY_LABEL] = "true"
        return manifest

    def result(self, ledger: RunLedger, last: JobResult | None) -> dict[str, Any]:
        """The task's result over every attempt: shard ids, not the last Job's indexes."""
        base = (
            last.to_dict()
            if last
            else {
                "job_name": None,
                "namespace": None,
                "workload_name": None,
                "cluster_queue": None,
                "queued_seconds": None,
                "running_seconds": None,
                "evictions": 0,
            }
        )
        return {
            **base,
            "completions": self.shard_count,
            "completed_indexes": str(ledger.completed),
            "failed_indexes": str(ledger.failed),
            "succeeded": len(ledger.completed),
            "failed": len(ledger.failed),
            "evictions": max(ledger.evictions, base.get("evictions") or 0),
            "attempts": len(ledger.attempts),
            "ledger": f"{self.config.container}/{self.ledger.name}",
        }

    def finish(self, job_name: str, job_result: JobResult, status: str) -> RunLedger:
        def done(current: RunLedger | None) -> RunLedger:
            ledger = current or RunLedger(self.shard_count)
            if ledger.attempt(job_name) is None:
                return ledger
            return ledger.with_job_progress(
                job_name,
                IndexSet.parse(job_result.completed_indexes),
                IndexSet.parse(job_result.failed_indexes),
                evictions=job_result.evictions,
                status=status,
                finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )

        return self.ledger.update(done)

    def clean_up_after_success(self) -> int:
        """Delete the shards' checkpoints (the ledger stays as the record) unless asked to keep them."""
        if self.config.keep_after_success:
            return 0
        return self.hook.delete_prefix(f"{self.prefix}/shards/")
