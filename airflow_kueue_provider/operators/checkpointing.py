"""Blob checkpoints and the run ledger, as the operator uses them (orchestration over the Blob hooks).

With checkpointing on, a task instance's shards are numbered 0..completions-1 and its ledger records which
finished. The first try runs them all; a later try runs only the unfinished ones, in a Job whose index ``i``
runs the ``i``-th of them (the pod learns its shard from ``AIRFLOW_KUEUE_SHARDS`` and the worker SDK).

``CheckpointSession`` is one try's view, composed of one part per concern, all sharing one
``CheckpointPlace`` (the ledger store and the salted shard container):

- ``AttemptLedger``: which shards are left, each attempt's start and end (``attempt_ledger``);
- ``PodAccess``: the pods' SAS for their shard container, its Secret, refresh and revoke (``pod_access``);
- ``PodShaping``: what each pod is told -- shards, checkpoint location, credential (``pod_shaping``);
- ``CheckpointResults``: the result over every attempt and the clean-up after success
  (``checkpoint_results``).

The session adds what spans parts (an attempt's end is recorded, then its SAS revoked) and keeps the calls
the operator, its kinds and ``@task.kueue`` make (``shard_session.ShardSession``; ``NoCheckpointing`` is
its null object).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..hooks.blob_containers import BlobAccountHook
from ..hooks.kind_client import KindClient
from ..hooks.ledger_store import LedgerStore
from ..kueue.checkpoints.ledger import RunLedger, ledger_prefix
from ..kueue.checkpoints.packing_choice import PackingChoice
from ..kueue.checkpoints.shard_packing import ShardPacks
from ..kueue.figures.attempt_figures import AttemptFigures
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.progress.deadline import DEADLINE_RESULT_KEYS
from ..kueue.progress.result import JobResult
from ..storage.blob_errors import BlobStoreError
from .attempt_ledger import AttemptLedger
from .checkpoint_config import Checkpointing
from .checkpoint_place import CheckpointPlace
from .checkpoint_results import CheckpointResults
from .pod_access import PodAccess, hand_over_secret, policy_of
from .pod_shaping import PodShaping

__all__ = ["CheckpointSession", "Checkpointing", "policy_of"]

log = logging.getLogger(__name__)


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
        hook = BlobAccountHook(config.conn_id, config.container, create_container=config.create_container)
        self.place = CheckpointPlace(config, self.prefix, hook, LedgerStore(hook, self.prefix), shard_count)
        self.attempts = AttemptLedger(self.place, identity, self.packing)
        self.access = PodAccess(self.place)
        self.shaping = PodShaping(self.place, self.packing, self.access)
        self.results = CheckpointResults(self.place, self.attempts)

    # --- the place: where the ledger and the shards' checkpoints are ----------------------------------------
    @property
    def hook(self) -> BlobAccountHook:
        return self.place.hook

    @property
    def ledger(self) -> LedgerStore:
        return self.place.ledger

    @property
    def container_salt(self) -> str | None:
        """The salt of the shard container's name (``CheckpointPlace.container_salt``)."""
        return self.place.container_salt

    @property
    def shard_container(self) -> str:
        return self.place.shard_container

    def check(self) -> None:
        """Fail fast (BlobConfigError) on an unknown connection, bad credentials, a missing container, or a
        connection that cannot sign the pods' SAS."""
        self.hook.check()
        if self.access.pods_use_sas:
            self.hook.check_can_sign()

    # --- the ledger -----------------------------------------------------------------------------------------
    def has_recorded_attempts(self) -> bool:
        ledger = self.place.ledger.read()
        return ledger is not None and bool(ledger.attempts)

    def remaining(self, jobs: list[dict[str, Any]]) -> tuple[IndexSet, RunLedger | None]:
        """The shards this try runs (those the ledger has not seen finish) and the ledger."""
        return self.attempts.remaining(jobs)

    def record_attempt(self, job_name: str, packs: ShardPacks) -> RunLedger:
        return self.attempts.record_attempt(job_name, packs)

    def job_packs(self, job: dict[str, Any], default: IndexSet) -> ShardPacks:
        """The shards a Job was created for, packed as it runs them (``AttemptLedger.job_packs``)."""
        return self.attempts.job_packs(job, default)

    def done_shards(self) -> IndexSet:
        """The shards with a done marker in the task instance's shard container (one listing)."""
        return self.attempts.done_shards()

    def trigger_ledger(self) -> dict[str, Any]:
        """What the trigger needs to keep the ledger current while the Job runs."""
        return self.attempts.trigger_ledger()

    def record_spilled(self, job: dict[str, Any], figures: AttemptFigures | None = None) -> RunLedger:
        """The final state of a Job whose unfinished shards go to a spill Job (it was deleted as read); its
        SAS is revoked (the attempt is over)."""
        ledger = self.attempts.record_spilled(job, figures)
        self.access.revoke_pod_access(job["metadata"]["name"])
        return ledger

    def finish(
        self, job_name: str, job_result: JobResult, status: str, figures: AttemptFigures | None = None
    ) -> RunLedger:
        """Record the attempt's end (``AttemptLedger.record_end``), then revoke its SAS (the attempt is
        over)."""
        ledger = self.attempts.record_end(job_name, job_result, status, figures)
        self.access.revoke_pod_access(job_name)
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
        """``current`` with the attempt's end recorded (pure: what ``finish`` writes)."""
        return self.attempts.finished(current, job_name, job_result, status, figures, done)

    # --- the pods' access to their shard container ----------------------------------------------------------
    @property
    def signed_ttl(self) -> timedelta:
        """How long each SAS this session signs is valid (``signed_sas_ttl``)."""
        return self.access.signed_ttl

    def prepare_pod_access(self, job_name: str | None = None) -> str | None:
        """Create the shard container and sign the pods' SAS, before the Job exists
        (``PodAccess.prepare_pod_access``)."""
        return self.access.prepare_pod_access(job_name)

    def sas_secret_name(self, job_name: str) -> str:
        """The SAS Secret ``shape_job`` named for ``job_name`` (a random suffix: not derivable)."""
        return self.access.sas_secret_name(job_name)

    def sas_secret(self, job: dict[str, Any], token: str) -> dict[str, Any]:
        """The Secret that hands the Job's pods their SAS, owned by the Job (``PodAccess.sas_secret``)."""
        return self.access.sas_secret(job, token)

    def hand_pods_their_sas(self, client: KindClient, obj: dict[str, Any], token: str | None) -> bool:
        """The Secret with the pods' SAS (``token``: None with workload identity), owned by the object; if
        it cannot be made, the object goes too (``hand_over_secret``). Returns whether it created it."""
        if token is None:
            return False
        return hand_over_secret(client, obj, lambda: self.sas_secret(obj, token))

    def ensure_pod_access(self, client: KindClient, obj: dict[str, Any]) -> None:
        """On reattach: create a Secret a dead worker never made, refresh the SAS handed out
        (``PodAccess.ensure_pod_access``)."""
        self.access.ensure_pod_access(client, obj)

    def trigger_credential(self, job_name: str) -> dict[str, Any] | None:
        """What the trigger needs to keep ``job_name``'s pod SAS valid (``PodAccess.trigger_credential``)."""
        return self.access.trigger_credential(job_name)

    # --- the pods' shards and checkpoint location -----------------------------------------------------------
    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """Run exactly ``shards`` and tell each pod where to checkpoint (``PodShaping.shape_job``)."""
        return self.shaping.shape_job(manifest, shards)

    # --- the result -----------------------------------------------------------------------------------------
    def result(self, ledger: RunLedger, last: JobResult | None) -> dict[str, Any]:
        """The task's result over every attempt: shard ids, not the last Job's indexes."""
        return self.results.result(ledger, last)

    def result_without_ledger_write(
        self, job: dict[str, Any] | None, job_result: JobResult, status: str
    ) -> dict[str, Any]:
        """The result when the ledger could not be written (``CheckpointResults``)."""
        return self.results.result_without_ledger_write(job, job_result, status)

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

    def clean_up_after_success(self) -> int:
        """Delete the shards' checkpoints and their container unless asked to keep them (the ledger stays)."""
        return self.results.clean_up_after_success()
