"""A task try's side of the run ledger: which shards are left, and each attempt's start and end.

Shards are numbered 0..shard_count-1; an attempt is one Job, recorded with the shards it runs (and how they
are packed). A write may be missed (a worker dies, Blob Storage is away): the next read catches the ledger up
from what the Jobs report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..kueue.checkpoints.ledger import Attempt, RunLedger, attempt_status
from ..kueue.checkpoints.packing_choice import PackingChoice
from ..kueue.checkpoints.shard_blob_names import done_shard_ids, shards_folder
from ..kueue.checkpoints.shard_packing import ShardPacks, packs_of_job
from ..kueue.figures.attempt_figures import AttemptFigures
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.job_progress import view_of
from ..kueue.progress.result import JobResult
from ..kueue.progress.spill import SPILLED_STATUS
from ..storage.blob_errors import BlobStoreError
from .checkpoint_place import CheckpointPlace

log = logging.getLogger(__name__)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class AttemptLedger:
    """Reads and records the try's attempts in the task instance's ledger (``place.ledger``)."""

    def __init__(self, place: CheckpointPlace, identity: AirflowIdentity, packing: PackingChoice) -> None:
        self.place = place
        self.identity = identity
        self.packing = packing

    def _update(self, change: Callable[[RunLedger], RunLedger]) -> RunLedger:
        """An ETag-conditioned update of the ledger, made (with the session's salt) where there is none."""
        return self.place.ledger.update(lambda current: change(current or self.place.new_ledger()))

    def reconcile(self, jobs: list[dict[str, Any]]) -> RunLedger:
        """The ledger, caught up with what earlier attempts' Jobs report (a write may have been missed)."""

        def catch_up(ledger: RunLedger) -> RunLedger:
            for job in jobs:
                name = job["metadata"]["name"]
                if ledger.attempt(name) is None:
                    continue
                view = view_of(job, None)
                status = attempt_status(finished_condition=(view.finished_condition or {}).get("type"))
                ledger = ledger.with_job_progress(name, view.completed, view.failed, status=status)
            return ledger

        return self._update(catch_up)

    def remaining(self, jobs: list[dict[str, Any]]) -> tuple[IndexSet, RunLedger | None]:
        """The shards this try runs (those the ledger has not seen finish) and the ledger."""
        ledger = self.reconcile(jobs)
        return ledger.remaining, ledger

    def record_attempt(self, job_name: str, packs: ShardPacks) -> RunLedger:
        """A submitted attempt: the shards its Job runs, packed as it runs them."""
        attempt = Attempt(
            self.identity.try_number, job_name, packs.shards, started_at=_now(), packing=packs.shape
        )
        return self._update(lambda ledger: ledger.with_attempt(attempt))

    def record_spilled(self, job: dict[str, Any], figures: AttemptFigures | None = None) -> RunLedger:
        """The final state of a Job whose unfinished shards go to a spill Job (it was deleted as read)."""
        name = job["metadata"]["name"]
        view = view_of(job, None)
        packs = self.job_packs(job, IndexSet.range(0, self.place.shard_count))
        now = _now()

        def record(ledger: RunLedger) -> RunLedger:
            if ledger.attempt(name) is None:  # its submission's record was lost: its env says its shards
                attempt = Attempt(self.identity.try_number, name, packs.shards, packing=packs.shape)
                ledger = ledger.with_attempt(attempt)
            return ledger.with_job_progress(
                name, view.completed, view.failed, status=SPILLED_STATUS, finished_at=now, figures=figures
            )

        return self._update(record)

    def job_packs(self, job: dict[str, Any], default: IndexSet) -> ShardPacks:
        """The shards a Job was created for and how many each index runs (its ``AIRFLOW_KUEUE_SHARDS`` and
        ``AIRFLOW_KUEUE_SHARDS_PER_POD``), or ``default`` packed as this session packs."""
        return packs_of_job(job) or self.packing.packs(default)

    def done_shards(self) -> IndexSet:
        """The shards with a done marker in the task instance's shard container (one listing)."""
        prefix = self.place.prefix
        with self.place.hook.container_hook(self.place.shard_container) as container:
            return done_shard_ids((name for name, _ in container.list_names(shards_folder(prefix))), prefix)

    def trigger_ledger(self) -> dict[str, Any]:
        """What the trigger needs to keep the ledger current while the Job runs."""
        return {
            "conn_id": self.place.config.conn_id,
            "container": self.place.config.container,
            "prefix": self.place.prefix,
            "shard_count": self.place.shard_count,
        }

    def record_end(
        self, job_name: str, job_result: JobResult, status: str, figures: AttemptFigures | None = None
    ) -> RunLedger:
        """Write the attempt's end (``finished``). Failed indexes of a packed task: the done markers (one
        listing) say which of their shards finished all the same; only the rest run again."""
        done = IndexSet()
        if job_result.failed_indexes and self.packing.packs_any:  # unpacked: an index is its one shard
            try:
                done = self.done_shards()
            except BlobStoreError as exc:  # the retry then starts the done ones, which exit at once
                log.warning("could not list the done shards of %s (%s)", job_name, exc)
        return self.place.ledger.update(
            lambda current: self.finished(current, job_name, job_result, status, figures, done)
        )

    def finished(
        self,
        current: RunLedger | None,
        job_name: str,
        job_result: JobResult,
        status: str,
        figures: AttemptFigures | None = None,
        done: IndexSet | None = None,
    ) -> RunLedger:
        """``current`` with the attempt's end recorded (pure: what ``record_end`` writes), and ``done``
        (shards with a done marker) among the attempt's completed ones."""
        ledger = current or self.place.new_ledger()
        if ledger.attempt(job_name) is None:
            return ledger
        ledger = ledger.with_job_progress(
            job_name,
            IndexSet.parse(job_result.completed_indexes),
            IndexSet.parse(job_result.failed_indexes),
            evictions=job_result.evictions,
            status=status,
            finished_at=_now(),
            figures=figures,
        )
        return ledger.with_done_shards(job_name, done) if done else ledger

    def as_if_recorded(
        self, current: RunLedger | None, job: dict[str, Any] | None, job_name: str
    ) -> RunLedger:
        """``current`` if it knows the attempt ``job_name``, else a ledger of that attempt alone: the shards
        its Job (``job``) was created for, or, with the Job gone, every shard as a first try runs them."""
        if current is not None and current.attempt(job_name) is not None:
            return current
        every = IndexSet.range(0, self.place.shard_count)
        packs = self.job_packs(job, every) if job else self.packing.packs(every)
        attempt = Attempt(self.identity.try_number, job_name, packs.shards, packing=packs.shape)
        return RunLedger(self.place.shard_count).with_attempt(attempt)
