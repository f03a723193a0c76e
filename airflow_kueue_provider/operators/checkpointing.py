"""Blob checkpoints and the run ledger, as the operator uses them (orchestration over the Blob hooks).

With checkpointing on, a task instance's shards are numbered 0..completions-1 and its ledger records which
finished. The first try runs them all; a later try runs only the unfinished ones, in a Job whose index ``i``
runs the ``i``-th of them (the pod learns its shard from ``AIRFLOW_KUEUE_SHARDS`` and the worker SDK).

What pods may touch (``kueue.checkpoint_access``): the shards checkpoint in a container of their task
instance's own, and each Job's pods get a SAS for that container only, through a Secret the operator creates
and the Job owns (Kubernetes deletes it with the Job), named with a random suffix only the Job's pod env
records. On account-key auth the SAS is bound to a per-attempt stored access policy: refreshed on reattach,
revoked when the attempt ends, refused by a re-created container. With an Azure identity (user-delegation)
it is short-lived and the trigger re-signs it into the Secret, which pods also mount as a file (the kubelet
refreshes it). The ledger stays in the base container, out of the pods' reach; the account key never
leaves Airflow.

The shard container's name is salted: the salt is drawn in the ledger's ETag-conditioned create (concurrent
first tries agree on it); every later use reads it from the ledger. A ledger made anew after a delete gets a
new salt, so its container a new name, which an old user-delegation SAS does not open.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..hooks.blob_containers import BlobAccountHook
from ..hooks.kind_client import KindClient
from ..hooks.ledger_store import LedgerStore
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.attempt_figures import AttemptFigures
from ..kueue.checkpoint_access import (
    ACCESS_ID_HEX,
    CredentialRenewal,
    access_policy_head,
    access_policy_id,
    credential_window,
    is_finished,
    mount_sas_file,
    sas_secret_name,
    secret_name_of,
    shard_container_name,
    signed_sas_ttl,
)
from ..kueue.deadline import DEADLINE_RESULT_KEYS
from ..kueue.index_set import IndexSet
from ..kueue.job_progress import view_of
from ..kueue.ledger import CONTAINER_SALT_HEX, Attempt, RunLedger, attempt_status, ledger_prefix
from ..kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_SAS_ENV,
    CHECKPOINT_SAS_FILE_ENV,
    CHECKPOINT_URL_ENV,
    GRACE_ENV,
    MIN_PARALLELISM_ANNOTATION,
    SAS_MOUNT_DIR,
    SAS_SECRET_KEY,
    SHARDS_ENV,
    SHARDS_PER_POD_ENV,
    WORKLOAD_IDENTITY_LABEL,
)
from ..kueue.result import JobResult
from ..kueue.shard_blob_names import done_shard_ids, shards_folder
from ..kueue.shard_packing import PackingChoice, ShardPacks, packs_of_job
from ..kueue.spill import SPILLED_STATUS
from ..storage.blob_auth import container_url_of
from ..storage.blob_errors import BlobStoreError
from .checkpoint_config import Checkpointing

__all__ = ["CheckpointSession", "Checkpointing", "policy_of"]

log = logging.getLogger(__name__)
_NO_JOB_KEYS = (
    "job_name",
    "namespace",
    "workload_name",
    "cluster_queue",
    "queued_seconds",
    "running_seconds",
)


class CheckpointSession:
    """One task try's view of its checkpoints and ledger (``NoCheckpointing`` is its null object)."""

    keeps_ledger = True

    def __init__(
        self,
        config: Checkpointing,
        identity: AirflowIdentity,
        shard_count: int,
        packing: PackingChoice | None = None,
    ) -> None:
        self.config = config
        self.identity = identity
        self.shard_count = shard_count
        self.packing = packing or PackingChoice()
        self.prefix = ledger_prefix(identity.dag_id, identity.run_id, identity.task_id, identity.map_index)
        self.hook = BlobAccountHook(
            config.conn_id, config.container, create_container=config.create_container
        )
        self.ledger = LedgerStore(self.hook, self.prefix)
        self._shaped = ("", secrets.token_hex(ACCESS_ID_HEX // 2))  # (job name, access id) of shape_job
        self._shaped_kind = "Job"  # the kind of the object shape_job shaped (its Secret's name says it)
        self._handed: dict[str, tuple[str, str, str]] = {}  # object name -> (namespace, Secret, object uid)
        self._fresh_salt = secrets.token_hex(CONTAINER_SALT_HEX // 2)  # a ledger this session creates has it

    @property
    def container_salt(self) -> str | None:
        """The salt of the shard container's name, as the ledger this session saw first records it (read
        now if none yet; None: a ledger of before salts, or no ledger)."""
        if self.ledger.salt is None:
            self.ledger.read()
        return self.ledger.salt[0] if self.ledger.salt else None

    @property
    def shard_container(self) -> str:
        return self._named(self.container_salt)

    def _named(self, salt: str | None) -> str:
        return shard_container_name(self.config.container, self.prefix, salt)

    def _salt_to_create(self) -> str | None:
        """The salt where this session makes the container (``shape_job``, ``prepare_pod_access``): with no
        ledger yet (a JobSet's first try, which records no attempt) it makes one holding its fresh salt,
        ETag-conditioned as any create."""
        if self.container_salt is None and self.ledger.salt is None:
            self.ledger.update(lambda current: current or self._new_ledger())
        return self.container_salt

    def _new_ledger(self) -> RunLedger:
        """Where an update finds no ledger: one with the salt this session uses, or its fresh one (of two
        first tries, the ETag loser re-reads: merge keeps the winner's salt)."""
        salt = self.ledger.salt[0] if self.ledger.salt else self._fresh_salt
        return RunLedger(self.shard_count, container_salt=salt)

    def check(self) -> None:
        """Fail fast (BlobConfigError) on an unknown connection, bad credentials, a missing container, or a
        connection that cannot sign the pods' SAS."""
        self.hook.check()
        if self.pods_use_sas:
            self.hook.check_can_sign()

    def reconcile(self, jobs: list[dict[str, Any]]) -> RunLedger:
        """The ledger, caught up with what earlier attempts' Jobs report (a write may have been missed)."""

        def catch_up(current: RunLedger | None) -> RunLedger:
            ledger = current or self._new_ledger()
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
        packs = self.job_packs(job, IndexSet.range(0, self.shard_count))
        now = datetime.now(UTC).isoformat(timespec="seconds")

        def record(current: RunLedger | None) -> RunLedger:
            ledger = current or self._new_ledger()
            if ledger.attempt(name) is None:  # its submission's record was lost: its env says its shards
                attempt = Attempt(self.identity.try_number, name, packs.shards, packing=packs.shape)
                ledger = ledger.with_attempt(attempt)
            return ledger.with_job_progress(
                name, view.completed, view.failed, status=SPILLED_STATUS, finished_at=now, figures=figures
            )

        ledger = self.ledger.update(record)
        self.revoke_pod_access(name)
        return ledger

    def record_attempt(self, job_name: str, packs: ShardPacks) -> RunLedger:
        attempt = Attempt(
            self.identity.try_number,
            job_name,
            packs.shards,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            packing=packs.shape,
        )
        return self.ledger.update(lambda current: (current or self._new_ledger()).with_attempt(attempt))

    def job_packs(self, job: dict[str, Any], default: IndexSet) -> ShardPacks:
        """The shards a Job was created for and how many each index runs (its ``AIRFLOW_KUEUE_SHARDS`` and
        ``AIRFLOW_KUEUE_SHARDS_PER_POD``), or ``default`` packed as this session packs."""
        return packs_of_job(job) or self.packing.packs(default)

    def done_shards(self) -> IndexSet:
        """The shards with a done marker in the task instance's shard container (one listing)."""
        folder = shards_folder(self.prefix)
        with self.hook.container_hook(self.shard_container) as container:
            return done_shard_ids((name for name, _ in container.list_names(folder)), self.prefix)

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
        (``CredentialRenewal``): move its stored policies (account key), or re-sign it into the Secret this
        session handed its pods (user-delegation). None where there is nothing to renew (workload identity,
        or no Secret handed: a finished object)."""
        if not self.pods_use_sas:
            return None
        ttl = self.signed_ttl.total_seconds()
        common = (self.config.conn_id, self.config.container, self.shard_container)
        if self.hook.binds_sas_to_policy:
            return CredentialRenewal(*common, access_policy_head(job_name), ttl).to_dict()
        if (handed := self._handed.get(job_name)) is None:
            return None
        namespace, secret, uid = handed
        return CredentialRenewal(*common, "", ttl, True, namespace, secret, uid).to_dict()

    @property
    def signed_ttl(self) -> timedelta:
        """How long each SAS this session signs is valid (``signed_sas_ttl``)."""
        return signed_sas_ttl(self.config.credential_ttl, self.hook.binds_sas_to_policy)

    @property
    def pods_use_sas(self) -> bool:
        return self.config.workload_identity_service_account is None

    def prepare_pod_access(self, job_name: str | None = None) -> str | None:
        """Create the task instance's shard container (kept across tries) and sign a SAS for it alone,
        bound (account key) to a new stored access policy of the Job (``job_name``, else the one
        ``shape_job`` shaped last).

        Returns the SAS token (None with workload identity). Called before the Job exists, so a connection
        that cannot sign fails the task with nothing created."""
        salt = self._salt_to_create()
        self.hook.ensure_container(self._named(salt), self.prefix, salt)
        if not self.pods_use_sas:
            return None
        start, expiry = credential_window(datetime.now(UTC), self.signed_ttl)
        policy = access_policy_id(job_name or self._shaped[0], secrets.token_hex(ACCESS_ID_HEX // 2))
        return self.hook.container_sas(self.shard_container, start, expiry, policy)

    def sas_secret_name(self, job_name: str) -> str:
        """The SAS Secret ``shape_job`` named for ``job_name`` (a random suffix: not derivable)."""
        return sas_secret_name(job_name, self._shaped[1], self._shaped_kind)

    def ensure_pod_access(self, client: KindClient, obj: dict[str, Any]) -> None:
        """On reattach: a worker that died between creating the object and its Secret left pods that can
        never start, so create the Secret (one that exists is kept: 409); and the SAS already handed out
        is refreshed (account key: its policies' window moves to now + ``credential_ttl``). A finished
        object, or one whose pods get no SAS, needs nothing."""
        name = obj["metadata"]["name"]
        if not self.pods_use_sas or secret_name_of(obj) is None or is_finished(obj):
            return
        start, expiry = credential_window(datetime.now(UTC), self.config.credential_ttl)
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
        if not self.hook.binds_sas_to_policy:
            log.info("%s %s: its trigger re-signs its pods' SAS into its Secret", client.noun, name)
        elif not refreshed:
            log.warning(
                "%s %s keeps the SAS it was given: it cannot be refreshed (its stored access policy is "
                "gone); a Job that waits longer than Checkpointing(credential_ttl=%s) gets pods whose "
                "SAS has expired: raise credential_ttl",
                client.noun,
                name,
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
        if (secret := secret_name_of(obj)) is not None and meta.get("uid"):
            self._handed[meta["name"]] = (meta["namespace"], secret, str(meta["uid"]))
        try:
            if client.hook.create_secret(self.sas_secret(obj, token)):
                return True
            log.info("the Secret of %s %s exists already (an earlier worker's)", client.noun, meta["name"])
            return False
        except Exception:
            client.delete_unless_finished(meta["namespace"], meta["name"], uid=meta.get("uid"))
            raise

    def pod_env(
        self,
        packs: ShardPacks,
        termination_grace: int = 30,
        job_name: str | None = None,
        owner_kind: str = "Job",
    ) -> list[dict[str, Any]]:
        container = self._named(self._salt_to_create())
        env: list[dict[str, Any]] = [
            {"name": SHARDS_ENV, "value": str(packs.shards)},
            *([{"name": SHARDS_PER_POD_ENV, "value": packs.shape}] if packs.per_pod > 1 else []),
            {"name": CHECKPOINT_URL_ENV, "value": container_url_of(self.hook.get_auth(), container)},
            {"name": CHECKPOINT_PREFIX_ENV, "value": self.prefix},
            # The SDK's SIGTERM flush must end before the kubelet's SIGKILL: 5 s short of the pod's grace.
            {"name": GRACE_ENV, "value": str(max(1, termination_grace - 5))},
        ]
        if self.pods_use_sas and job_name:
            secret = {"name": sas_secret_name(job_name, self._shaped[1], owner_kind), "key": SAS_SECRET_KEY}
            env.append({"name": CHECKPOINT_SAS_ENV, "valueFrom": {"secretKeyRef": secret}})
            env.append({"name": CHECKPOINT_SAS_FILE_ENV, "value": f"{SAS_MOUNT_DIR}/{SAS_SECRET_KEY}"})
        return env

    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """Run exactly ``shards`` (completions = their count, or their packs' with several per pod) and tell
        each pod where to checkpoint, with which credential (the Job's SAS Secret, created right after the
        Job: the Job starts suspended; its name gets a new random suffix here)."""
        name = str(manifest.get("metadata", {}).get("name") or "")
        self._shaped = (name, secrets.token_hex(ACCESS_ID_HEX // 2))
        self._shaped_kind = str(manifest.get("kind") or "Job")
        packs = self.packing.packs(shards)
        spec = manifest["spec"]
        spec["completions"] = count = packs.index_count
        spec["parallelism"] = min(int(spec.get("parallelism") or count), count)
        annotations = manifest.get("metadata", {}).get("annotations") or {}
        if int(annotations.get(MIN_PARALLELISM_ANNOTATION) or 0) >= spec["parallelism"]:
            del annotations[MIN_PARALLELISM_ANNOTATION]  # so few shards: Kueue admits them all, or none
        if spec.get("maxFailedIndexes") is not None:
            spec["maxFailedIndexes"] = min(int(spec["maxFailedIndexes"]), count)
        pod = spec["template"]
        grace = int(pod["spec"].get("terminationGracePeriodSeconds") or 30)
        env = self.pod_env(packs, grace, manifest.get("metadata", {}).get("name"), self._shaped_kind)
        names = {e["name"] for e in env}
        for container in pod["spec"]["containers"]:
            container["env"] = [e for e in container.get("env") or [] if e["name"] not in names] + env
        if (secret := secret_name_of(manifest)) is not None:
            mount_sas_file(pod["spec"], secret)
        if self.config.workload_identity_service_account:
            pod["spec"]["serviceAccountName"] = self.config.workload_identity_service_account
            pod.setdefault("metadata", {}).setdefault("labels", {})[WORKLOAD_IDENTITY_LABEL] = "true"
        return manifest

    def result(self, ledger: RunLedger, last: JobResult | None) -> dict[str, Any]:
        """The task's result over every attempt: shard ids, not the last Job's indexes."""
        base = last.to_dict() if last else {**dict.fromkeys(_NO_JOB_KEYS), "evictions": 0}
        return {
            **base,
            "completions": self.shard_count,
            "completed_indexes": str(ledger.completed),
            "failed_indexes": str(ledger.failed),
            "succeeded": len(ledger.completed),
            "failed": len(ledger.failed),
            "evictions": max(ledger.evictions, base.get("evictions") or 0),
            "attempts": len(ledger.attempts),
            "retried_shards": sum(len(a.shards) for a in ledger.attempts[1:]),
            "ledger": f"{self.config.container}/{self.ledger.name}",
        }

    def finish(
        self, job_name: str, job_result: JobResult, status: str, figures: AttemptFigures | None = None
    ) -> RunLedger:
        """Record the attempt's end, then revoke its SAS (the attempt is over). Failed indexes of a packed
        task: the done markers (one listing) say which of their shards finished all the same; only the rest
        run again."""
        done = IndexSet()
        if job_result.failed_indexes and self.packing.packs_any:  # unpacked: an index is its one shard
            try:
                done = self.done_shards()
            except BlobStoreError as exc:  # the retry then starts the done ones, which exit at once
                log.warning("could not list the done shards of %s (%s)", job_name, exc)
        ledger = self.ledger.update(
            lambda current: self.finished(current, job_name, job_result, status, figures, done)
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
        done: IndexSet | None = None,
    ) -> RunLedger:
        """``current`` with the attempt's end recorded (pure: what ``finish`` writes), and ``done`` (shards
        with a done marker) among the attempt's completed ones."""
        ledger = current or self._new_ledger()
        if ledger.attempt(job_name) is None:
            return ledger
        ledger = ledger.with_job_progress(
            job_name,
            IndexSet.parse(job_result.completed_indexes),
            IndexSet.parse(job_result.failed_indexes),
            evictions=job_result.evictions,
            status=status,
            finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
            figures=figures,
        )
        return ledger.with_done_shards(job_name, done) if done else ledger

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
            packs = self.job_packs(job, every) if job else self.packing.packs(every)
            attempt = Attempt(
                self.identity.try_number, job_result.job_name, packs.shards, packing=packs.shape
            )
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
            deleted = shards.delete_prefix(shards_folder(self.prefix))
        self.hook.delete_container_if_empty(self.shard_container)
        return deleted


def policy_of(token: str | None) -> str | None:
    """The stored access policy id (``si=``) a SAS token is bound to, if any."""
    for part in (token or "").split("&"):
        key, _, value = part.partition("=")
        if key == "si":
            return value
    return None
