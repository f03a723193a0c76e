"""Blob checkpoints and the run ledger, as the operator uses them (orchestration over the Blob hooks).

With checkpointing on, a task instance's shards are numbered 0..completions-1 and its ledger records which
finished. The first try runs them all; a later try runs only the unfinished ones, in a Job whose index ``i``
runs the ``i``-th of them (the pod learns its shard from ``AIRFLOW_KUEUE_SHARDS`` and the worker SDK).

What pods may touch (``kueue.checkpoint_access``): the shards checkpoint in a container of their task
instance's own, and each Job's pods get a SAS for that container only, through a Secret the operator creates
and the Job owns (Kubernetes deletes it with the Job), named with a random suffix only the Job's pod env
records. On account-key auth the SAS is bound to a per-attempt stored access policy: refreshed on reattach,
revoked when the attempt ends, refused by a re-created container. The ledger stays in the base container,
out of the pods' reach; the account key never leaves Airflow.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ..hooks.blob_containers import BlobAccountHook
from ..hooks.kind_client import KindClient
from ..hooks.ledger_store import LedgerStore
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.attempt_figures import AttemptFigures
from ..kueue.checkpoint_access import (
    ACCESS_ID_HEX,
    DEFAULT_CREDENTIAL_TTL,
    CredentialRenewal,
    access_policy_head,
    access_policy_id,
    credential_window,
    is_container_name,
    is_finished,
    sas_secret_name,
    secret_name_of,
    shard_container_name,
)
from ..kueue.deadline import DEADLINE_RESULT_KEYS
from ..kueue.index_set import IndexSet
from ..kueue.job_progress import view_of
from ..kueue.ledger import Attempt, RunLedger, attempt_status, ledger_prefix
from ..kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_SAS_ENV,
    CHECKPOINT_URL_ENV,
    GRACE_ENV,
    MIN_PARALLELISM_ANNOTATION,
    SAS_SECRET_KEY,
    SHARDS_ENV,
    WORKLOAD_IDENTITY_LABEL,
)
from ..kueue.pod_policy import PodPolicy, service_account_violation
from ..kueue.result import JobResult
from ..kueue.spill import SPILLED_STATUS
from ..storage.blob_auth import container_url_of
from ..storage.blob_errors import BlobStoreError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpointing:
    """Where shards checkpoint and how their pods reach it.

    :param conn_id: the Blob connection of Airflow (``wasb``-style fields). To give pods a SAS it must be able
        to sign one: the account key (connection string with ``AccountKey``, or ``login`` + ``password``) or
        an Azure identity allowed to get a user-delegation key.
    :param container: the base container: ledgers live here, each task instance's shard checkpoints in a
        container of its own named after it (``<container head>-<hash>``).
    :param credential_ttl: how long a Job's pod SAS is valid (from submission, and again from each
        reattach on account-key auth): the longest a Job may queue and run. A retry gets a new one; an
        ended attempt's SAS is revoked (account key). At most 7 days.
    :param workload_identity_service_account: on AKS, run the pods as this ServiceAccount (workload
        identity) instead of giving them a SAS; grant its identity access to the shard containers only.
    """

    conn_id: str
    container: str = "airflow-kueue"
    create_container: bool = True
    workload_identity_service_account: str | None = None
    keep_after_success: bool = False
    credential_ttl: timedelta = DEFAULT_CREDENTIAL_TTL

    def __post_init__(self) -> None:
        if not is_container_name(self.container):
            raise ValueError(
                f"Checkpointing(container={self.container!r}) is not a valid Blob container name: use 3-63 "
                "lowercase letters, digits and single hyphens, starting and ending with a letter or digit"
            )
        credential_window(datetime.now(timezone.utc), self.credential_ttl)  # validates the TTL

    def pod_policy_problem(self, policy: PodPolicy) -> str | None:
        """The workload identity's ServiceAccount is the pods' too: the cluster's pod policy must allow it
        (checked before anything is created; the Job's own check ran before checkpointing shaped it)."""
        return service_account_violation(
            self.workload_identity_service_account, policy, "Checkpointing workload_identity_service_account"
        )

    @classmethod
    def from_param(
        cls, value: Checkpointing | dict[str, Any] | str | None, queue_timeout: float | None = None
    ) -> Checkpointing | None:
        """The operator's ``checkpointing=``; with ``queue_timeout`` (seconds), a pod credential that could
        expire while the Job may still wait in its queue is refused (ValueError naming both)."""
        if value is None or isinstance(value, Checkpointing):
            config = value
        elif isinstance(value, str):
            config = cls(conn_id=value)
        else:
            config = cls(**value)
        waits = timedelta(seconds=queue_timeout) if queue_timeout is not None else None
        if config is not None and waits is not None and config.credential_ttl <= waits:
            raise ValueError(
                f"credential_ttl={config.credential_ttl} is not longer than queue_timeout={waits}: a Job "
                "that waits that long gets pods whose SAS has expired; set Checkpointing(credential_ttl=...) "
                "above queue_timeout (at most 7 days) or lower queue_timeout"
            )
        return config


class CheckpointSession:
    """One task try's view of its checkpoints and ledger (``NoCheckpointing`` is its null object)."""

    keeps_ledger = True

    def __init__(self, config: Checkpointing, identity: AirflowIdentity, shard_count: int) -> None:
        self.config = config
        self.identity = identity
        self.shard_count = shard_count
        self.prefix = ledger_prefix(identity.dag_id, identity.run_id, identity.task_id, identity.map_index)
        self.shard_container = shard_container_name(config.container, self.prefix)
        self.hook = BlobAccountHook(
            config.conn_id, config.container, create_container=config.create_container
        )
        self.ledger = LedgerStore(self.hook, self.prefix)
        self._shaped = ("", secrets.token_hex(ACCESS_ID_HEX // 2))  # (job name, access id) of shape_job

    def check(self) -> None:
        """Fail fast (BlobConfigError) on an unknown connection, bad credentials, a missing container, or a
        connection that cannot sign the pods' SAS."""
        self.hook.check()
        if self.pods_use_sas:
            self.hook.check_can_sign()

    def reconcile(self, jobs: list[dict[str, Any]]) -> RunLedger:
        """The ledger, caught up with what earlier attempts' Jobs report (a write may have been missed)."""

        def catch_up(current: RunLedger | None) -> RunLedger:
            ledger = current or RunLedger(self.shard_count)
            for job in jobs:
                name = job["metadata"]["name"]
                if ledger.attempt(name) is None:
                    continue
                view = view_of(job, None)
                status = attempt_status(finished_condition=(view.finished_condition or {}).get("type"))
                ledger = ledger.with_job_progress(name, view.completed, view.failed, status=status)
            return ledger

        return self.ledger.update(catch_up)

    def remaining(self, jobs: list[dict[str, Any]]) -> tuple[IndexSet, RunLedger | None]:
        """The shards this try runs (those the ledger has not seen finish) and the ledger."""
        ledger = self.reconcile(jobs)
        return ledger.remaining, ledger

    def recorded_result(
        self,
        result: dict[str, Any],
        status: str,
        figures: AttemptFigures | None,
        read_job: Callable[[str], dict[str, Any] | None],
    ) -> tuple[dict[str, Any], RunLedger | None]:
        """Write the attempt's end (and figures) to the ledger; Blob trouble costs the record, never the
        task's outcome. The result is over every attempt and keeps the deadline's keys (JobResult is one
        Job's); the ledger is None when it could not be written (``read_job`` reads the Job then)."""
        if "completed_indexes" not in result:
            return result, None
        deadline_keys = {k: result[k] for k in DEADLINE_RESULT_KEYS if k in result}
        job_result = JobResult.from_dict(result)
        try:
            ledger = self.finish(job_result.job_name, job_result, status, figures)
        except BlobStoreError as exc:
            log.warning(
                "could not update the ledger (%s); a rerun of this task catches it up from the Job", exc
            )
            written = self.result_without_ledger_write(read_job(job_result.job_name), job_result, status)
            return {**written, **deadline_keys}, None
        return {**self.result(ledger, job_result), **deadline_keys}, ledger

    def record_spilled(self, job: dict[str, Any], figures: AttemptFigures | None = None) -> RunLedger:
        """The final state of a Job whose unfinished shards go to a spill Job (it was deleted as read)."""
        name = job["metadata"]["name"]
        view = view_of(job, None)
        shards = self.job_shards(job, IndexSet.range(0, self.shard_count))
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")

        def record(current: RunLedger | None) -> RunLedger:
            ledger = current or RunLedger(self.shard_count)
            if ledger.attempt(name) is None:  # its submission's record was lost: its env says its shards
                ledger = ledger.with_attempt(Attempt(self.identity.try_number, name, shards))
            return ledger.with_job_progress(
                name, view.completed, view.failed, status=SPILLED_STATUS, finished_at=now, figures=figures
            )

        ledger = self.ledger.update(record)
        self.revoke_pod_access(name)
        return ledger

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
        pod = (job.get("spec") or {}).get("template") or {}
        for container in (pod.get("spec") or {}).get("containers") or []:
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

    def trigger_credential(self, job_name: str) -> dict[str, Any] | None:
        """What the trigger needs to keep ``job_name``'s pod SAS valid however long it waits or runs
        (``CredentialRenewal``); None where there is nothing to renew (workload identity, or a
        user-delegation SAS, which carries its own expiry)."""
        if not self.pods_use_sas or not self.hook.binds_sas_to_policy:
            return None
        return CredentialRenewal(
            self.config.conn_id,
            self.config.container,
            self.shard_container,
            access_policy_head(job_name),
            self.config.credential_ttl.total_seconds(),
        ).to_dict()

    @property
    def pods_use_sas(self) -> bool:
        return self.config.workload_identity_service_account is None

    def prepare_pod_access(self, job_name: str | None = None) -> str | None:
        """Create the task instance's shard container (kept across tries) and sign a SAS for it alone,
        bound (account key) to a new stored access policy of the Job (``job_name``, else the one
        ``shape_job`` shaped last).

        Returns the SAS token (None with workload identity). Called before the Job exists, so a connection
        that cannot sign fails the task with nothing created."""
        self.hook.ensure_container(self.shard_container, self.prefix)
        if not self.pods_use_sas:
            return None
        start, expiry = credential_window(datetime.now(timezone.utc), self.config.credential_ttl)
        policy = access_policy_id(job_name or self._shaped[0], secrets.token_hex(ACCESS_ID_HEX // 2))
        return self.hook.container_sas(self.shard_container, start, expiry, policy)

    def sas_secret_name(self, job_name: str) -> str:
        """The SAS Secret ``shape_job`` named for ``job_name`` (a random suffix: not derivable)."""
        return sas_secret_name(job_name, self._shaped[1])

    def ensure_pod_access(self, client: KindClient, obj: dict[str, Any]) -> None:
        """On reattach: a worker that died between creating the object and its Secret left pods that can
        never start, so create the Secret (one that exists is kept: 409); and the SAS already handed out
        is refreshed (account key: its policies' window moves to now + ``credential_ttl``). A finished
        object, or one whose pods get no SAS, needs nothing."""
        name = obj["metadata"]["name"]
        if not self.pods_use_sas or secret_name_of(obj) is None or is_finished(obj):
            return
        start, expiry = credential_window(datetime.now(timezone.utc), self.config.credential_ttl)
        head = access_policy_head(name)
        refreshed = self.hook.binds_sas_to_policy and self.hook.extend_access(
            self.shard_container, head, start, expiry
        )
        self._shaped = (name, self._shaped[1])
        token = self.prepare_pod_access(name)
        if self.hand_pods_their_sas(client, obj, token):
            log.warning("created the missing SAS Secret of %s %s (its worker died before)", client.noun, name)
            return
        self.revoke_pod_access(name, policy_of(token))  # the Secret exists: the new policy is unused
        if not refreshed:
            log.warning(
                "%s %s keeps the SAS it was given: it cannot be refreshed (%s); a Job that waits longer than "
                "Checkpointing(credential_ttl=%s) gets pods whose SAS has expired: raise credential_ttl",
                client.noun,
                name,
                "a user-delegation SAS carries its own expiry"
                if not self.hook.binds_sas_to_policy
                else "its stored access policy is gone",
                self.config.credential_ttl,
            )

    def revoke_pod_access(self, job_name: str, policy_id: str | None = None) -> None:
        """Drop the Job's stored access policies (or the one ``policy_id``): its SAS stops working. Blob
        trouble costs the revoke (the policy expires on its own), never the task."""
        if not self.pods_use_sas or not self.hook.binds_sas_to_policy:
            return
        try:
            self.hook.revoke_access(self.shard_container, policy_id or access_policy_head(job_name))
        except BlobStoreError as exc:
            log.warning("could not revoke the SAS of %s (%s); it expires on its own", job_name, exc)

    def sas_secret(self, job: dict[str, Any], token: str) -> dict[str, Any]:
        """The Secret that hands the Job's pods their SAS, owned by the Job (or JobSet): it goes with it.
        Its name is the one the object's pod env reads."""
        meta = job["metadata"]
        secret_name = secret_name_of(job)
        if secret_name is None:
            raise ValueError(f"{meta['name']}: its pods read no {CHECKPOINT_SAS_ENV} Secret (not shaped)")
        owner = {"apiVersion": job.get("apiVersion") or "batch/v1", "kind": job.get("kind") or "Job"}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": secret_name,
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [{**owner, "name": meta["name"], "uid": meta["uid"]}],
            },
            "stringData": {SAS_SECRET_KEY: token},
        }

    def hand_pods_their_sas(self, client: KindClient, obj: dict[str, Any], token: str | None) -> bool:
        """The Secret with the pods' SAS (``token``: None with workload identity), owned by the object (it
        goes with it). The object was created suspended, and a pod that starts before its Secret exists waits
        for it (the kubelet retries). If the Secret cannot be made, the object goes too (unless it finished):
        its pods could never checkpoint. Returns whether it created the Secret."""
        if token is None:
            return False
        meta = obj["metadata"]
        try:
            if client.hook.create_secret(self.sas_secret(obj, token)):
                return True
            log.info("the Secret of %s %s exists already (an earlier worker's)", client.noun, meta["name"])
            return False
        except Exception:
            client.delete_unless_finished(meta["namespace"], meta["name"], uid=meta.get("uid"))
            raise

    def pod_env(
        self, shards: IndexSet, termination_grace: int = 30, job_name: str | None = None
    ) -> list[dict[str, Any]]:
        env: list[dict[str, Any]] = [
            {"name": SHARDS_ENV, "value": str(shards)},
            {
                "name": CHECKPOINT_URL_ENV,
                "value": container_url_of(self.hook.get_auth(), self.shard_container),
            },
            {"name": CHECKPOINT_PREFIX_ENV, "value": self.prefix},
            # The SDK's SIGTERM flush must end before the kubelet's SIGKILL: 5 s short of the pod's grace.
            {"name": GRACE_ENV, "value": str(max(1, termination_grace - 5))},
        ]
        if self.pods_use_sas and job_name:
            secret = {"name": sas_secret_name(job_name, self._shaped[1]), "key": SAS_SECRET_KEY}
            env.append({"name": CHECKPOINT_SAS_ENV, "valueFrom": {"secretKeyRef": secret}})
        return env

    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """Run exactly ``shards`` (completions = their count) and tell each pod where to checkpoint, with
        which credential (the Job's SAS Secret, created right after the Job: the Job starts suspended; its
        name gets a new random suffix here)."""
        name = str(manifest.get("metadata", {}).get("name") or "")
        self._shaped = (name, secrets.token_hex(ACCESS_ID_HEX // 2))
        spec = manifest["spec"]
        spec["completions"] = len(shards)
        spec["parallelism"] = min(int(spec.get("parallelism") or len(shards)), len(shards))
        annotations = manifest.get("metadata", {}).get("annotations") or {}
        if int(annotations.get(MIN_PARALLELISM_ANNOTATION) or 0) >= spec["parallelism"]:
            del annotations[MIN_PARALLELISM_ANNOTATION]  # so few shards: Kueue admits them all, or none
        if spec.get("maxFailedIndexes") is not None:
            spec["maxFailedIndexes"] = min(int(spec["maxFailedIndexes"]), len(shards))
        pod = spec["template"]
        grace = int(pod["spec"].get("terminationGracePeriodSeconds") or 30)
        env = self.pod_env(shards, grace, manifest.get("metadata", {}).get("name"))
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

    def finish(
        self, job_name: str, job_result: JobResult, status: str, figures: AttemptFigures | None = None
    ) -> RunLedger:
        """Record the attempt's end, then revoke its SAS (the attempt is over)."""
        ledger = self.ledger.update(
            lambda current: self.finished(current, job_name, job_result, status, figures)
        )
        self.revoke_pod_access(job_name)
        return ledger

    def finished(
        self,
        current: RunLedger | None,
        job_name: str,
        job_result: JobResult,
        status: str,
        figures: AttemptFigures | None = None,
    ) -> RunLedger:
        """``current`` with the attempt's end recorded (pure: what ``finish`` writes)."""
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
            figures=figures,
        )

    def result_without_ledger_write(
        self, job: dict[str, Any] | None, job_result: JobResult, status: str
    ) -> dict[str, Any]:
        """The result when the ledger could not be written: over every attempt if the ledger can still be
        read, else over this attempt alone -- always in shard ids (a retry's Job index 0 is not shard 0),
        with ``ledger_written: False``. The next try, or a rerun, catches the ledger up from the Jobs."""
        try:
            current = self.ledger.read()
        except BlobStoreError:
            current = None
        if current is None or current.attempt(job_result.job_name) is None:
            every = IndexSet.range(0, self.shard_count)  # a Job that is gone: as a first try would run
            shards = self.job_shards(job, every) if job else every
            attempt = Attempt(self.identity.try_number, job_result.job_name, shards)
            current = RunLedger(self.shard_count).with_attempt(attempt)
        return {
            **self.result(self.finished(current, job_result.job_name, job_result, status), job_result),
            "ledger_written": False,
        }

    def clean_up_after_success(self) -> int:
        """Delete the shards' checkpoints and their container (the ledger stays as the record) unless
        asked to keep them."""
        if self.config.keep_after_success:
            return 0
        with self.hook.container_hook(self.shard_container) as shards:
            deleted = shards.delete_prefix(f"{self.prefix}/shards/")
        self.hook.delete_container_if_empty(self.shard_container)
        return deleted


def policy_of(token: str | None) -> str | None:
    """The stored access policy id (``si=``) a SAS token is bound to, if any."""
    for part in (token or "").split("&"):
        key, _, value = part.partition("=")
        if key == "si":
            return value
    return None
