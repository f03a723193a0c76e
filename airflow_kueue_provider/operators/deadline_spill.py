"""``on_deadline_risk spill_to``, the worker's side: move a waiting run's unfinished shards to another
LocalQueue (when it is safe: ``kueue.progress.spill``), as numbered steps over the hook and the ledger.
The spill Job is submitted through the operator template's own submit (``Submit``): shaped, given its pods'
access, created or adopted, and recorded in the ledger like any try's Job."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..hooks.kind_client import KindClient
from ..kueue.figures.attempt_figures import AttemptFigures, CostModel, status_figures
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.progress.spill import WAITING, not_spillable_because, spill_manifest, spilled_detail
from ..kueue.progress.trigger_event import KueueEvent
from .checkpointing import CheckpointSession
from .job_submission import Submission

log = logging.getLogger(__name__)

Submit = Callable[[dict[str, Any], IndexSet], Submission]
"""The template's submit for this try (``KueueOperator._submit`` with the entry's client, identity and
shards bound): the manifest to create and the shards its indexes run."""


@dataclass(frozen=True)
class SpillOutcome:
    step: dict[str, str]
    """The escalation as the result lists it."""
    job: dict[str, Any] | None
    """The spill Job, when the spill was taken; None when it waits."""


@dataclass(frozen=True)
class JobSpill:
    """The Job kind's ``spill_to`` for one escalation, with everything it needs given (``DeadlineHandling``
    calls it with the Job as read now and the trigger's event)."""

    client: KindClient
    session: CheckpointSession
    identity: AirflowIdentity
    manifest: dict[str, Any]
    """This try's Job as the operator builds it: the spill Job is made from it."""
    spill_name: str
    queue_name: str
    cost_model: CostModel
    spot: bool
    submit: Submit

    def __call__(self, job: dict[str, Any], event: KueueEvent) -> SpillOutcome:
        now = datetime.now(UTC)
        return spill(
            self.client,
            job,
            manifest=self.manifest,
            spill_name=self.spill_name,
            queue_name=self.queue_name,
            session=self.session,
            submit=self.submit,
            why=event.message or "deadline at risk",
            figures=status_figures(job, self.cost_model, self.spot, self.identity.try_number, now=now),
        )


def spill(
    client: KindClient,
    job: dict[str, Any],
    *,
    manifest: dict[str, Any],
    spill_name: str,
    queue_name: str,
    session: CheckpointSession,
    submit: Submit,
    why: str,
    figures: AttemptFigures | None = None,
) -> SpillOutcome:
    """Spill ``job`` (as read just now) to ``queue_name`` as ``spill_name``, built from ``manifest`` (the
    operator's Job for this try), or say why it waits. ``figures``: the first Job's, for the ledger."""
    meta = job["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    hook = client.hook

    def step(detail: str) -> dict[str, str]:
        return {"step": "spill_to", "at": _now(), "detail": detail, "why": why}

    # 1. Only a Job with no quota and no pod: nothing of it runs, nothing of it can still finish.
    if reason := not_spillable_because(job, hook.pods_of_job(namespace, name)):
        log.warning("spill of Job %s/%s to %s waits: %s", namespace, name, queue_name, reason)
        return SpillOutcome(step(WAITING + reason), None)
    # 2. Delete it only as read: if Kueue admitted it since (or anything else changed it), it stays.
    unchanged = {"uid": meta.get("uid"), "resource_version": meta.get("resourceVersion")}
    if not hook.delete_job(namespace, name, **unchanged):
        reason = "the Job changed while the spill was prepared (Kueue may have admitted it)"
        log.warning("spill of Job %s/%s waits: %s", namespace, name, reason)
        return SpillOutcome(step(WAITING + reason), None)
    # 3. Its finished shards stay finished in the ledger; the others are what the spill Job runs.
    ledger = session.record_spilled(job, figures)
    shards = ledger.remaining
    # 4. The spill Job, through the template's submit: the same shard mapping as a retry (index i runs the
    #    i-th unfinished shard), sealed like the first, its own SAS for the task instance's checkpoint
    #    container (so shards resume from their checkpoints), recorded in the ledger.
    submission = submit(spill_manifest(manifest, spill_name, queue_name), shards)
    detail = spilled_detail(shards, spill_name, queue_name, name)
    log.warning("Job %s/%s: %s", namespace, name, detail)
    return SpillOutcome(step(detail), submission.job)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
