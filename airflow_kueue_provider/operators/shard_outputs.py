"""``shard_outputs=True`` (``KueueOperator``): each shard's ``mark_done`` output in the task's result for a
reduce step, read before the clean-up, as ``@task.kueue`` does for its return values (``task_results``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..airflow_compat import AirflowFailException
from ..kueue.errors import KueueProviderError
from .checkpointing import CheckpointSession
from .task_results import OUTPUTS_BLOB_KEY, OUTPUTS_COUNT_KEY, collect_shard_outputs, keeps_records

if TYPE_CHECKING:
    from .operator_kind import Shards


class ShardOutputsNeedCheckpointing(AirflowFailException, KueueProviderError):
    """``shard_outputs=True`` without ``checkpointing=``: there are no done records to read."""


def check_shard_outputs(task_id: str, shard_outputs: bool, checkpointing: object) -> bool:
    """``shard_outputs``, refused when the DAG is parsed without ``checkpointing``."""
    if shard_outputs and checkpointing is None:
        raise ShardOutputsNeedCheckpointing(
            f"{task_id}: shard_outputs=True reads each shard's mark_done record in the checkpoint container: "
            "set checkpointing= (a Blob connection id), or remove shard_outputs"
        )
    return shard_outputs


class ShardOutputsStep:
    """Mixed into ``KueueOperator`` before the kind's part: adds the outputs to a successful result and keeps
    the records the result points at."""

    shard_outputs: bool = False
    if TYPE_CHECKING:
        log: Any

    def _succeeded(self, result: dict[str, Any], shards: Shards) -> dict[str, Any]:
        result = super()._succeeded(result, shards)  # type: ignore[misc]
        if not self.shard_outputs or not isinstance(shards, CheckpointSession):
            return result
        collected = collect_shard_outputs(shards)
        if OUTPUTS_BLOB_KEY in collected:
            self.log.info(
                "%d shard outputs are too large for XCom: they stay in their done records, %s (kept)",
                collected[OUTPUTS_COUNT_KEY],
                collected[OUTPUTS_BLOB_KEY],
            )
        return {**result, **collected}

    def _keeps_records(self, result: dict[str, Any]) -> bool:
        """Whether the shards' checkpoints must stay after success: the result points at their records."""
        if keeps_records(result):
            self.log.info("the shards' checkpoints and done records are kept: the result points at them")
            return True
        return False
