"""A checkpointed task's result: over every attempt and in shard ids (a retry's Job index 0 is not shard 0),
and the clean-up of the shards' checkpoints after success (the ledger stays as the record)."""

from __future__ import annotations

from typing import Any

from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.checkpoints.shard_blob_names import shards_folder
from ..kueue.progress.result import JobResult
from ..storage.blob_errors import BlobStoreError
from .attempt_ledger import AttemptLedger
from .checkpoint_place import CheckpointPlace

_NO_JOB_KEYS = (
    "job_name",
    "namespace",
    "workload_name",
    "cluster_queue",
    "queued_seconds",
    "running_seconds",
)


class CheckpointResults:
    """Turns the ledger (and the last Job's result) into the task's result."""

    def __init__(self, place: CheckpointPlace, attempts: AttemptLedger) -> None:
        self.place = place
        self.attempts = attempts

    def result(self, ledger: RunLedger, last: JobResult | None) -> dict[str, Any]:
        """The task's result over every attempt: shard ids, not the last Job's indexes."""
        base = last.to_dict() if last else {**dict.fromkeys(_NO_JOB_KEYS), "evictions": 0}
        return {
            **base,
            "completions": self.place.shard_count,
            "completed_indexes": str(ledger.completed),
            "failed_indexes": str(ledger.failed),
            "succeeded": len(ledger.completed),
            "failed": len(ledger.failed),
            "evictions": max(ledger.evictions, base.get("evictions") or 0),
            "attempts": len(ledger.attempts),
            "retried_shards": sum(len(a.shards) for a in ledger.attempts[1:]),
            "ledger": f"{self.place.config.container}/{self.place.ledger.name}",
        }

    def result_without_ledger_write(
        self, job: dict[str, Any] | None, job_result: JobResult, status: str
    ) -> dict[str, Any]:
        """The result when the ledger could not be written: over every attempt if the ledger can still be
        read, else over this attempt alone -- always in shard ids, with ``ledger_written: False``. The next
        try, or a rerun, catches the ledger up from the Jobs."""
        try:
            current = self.place.ledger.read()
        except BlobStoreError:
            current = None
        name = job_result.job_name
        known = self.attempts.as_if_recorded(current, job, name)
        ended = self.attempts.finished(known, name, job_result, status)
        return {**self.result(ended, job_result), "ledger_written": False}

    def clean_up_after_success(self) -> int:
        """Delete the shards' checkpoints and their container (the ledger stays as the record) unless
        asked to keep them. Returns how many blobs went."""
        place = self.place
        if place.config.keep_after_success:
            return 0
        with place.hook.container_hook(place.shard_container) as shards:
            deleted = shards.delete_prefix(shards_folder(place.prefix))
        place.hook.delete_container_if_empty(place.shard_container)
        return deleted
