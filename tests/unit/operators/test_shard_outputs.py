"""``shard_outputs=True`` needs ``checkpointing=`` (refused when the DAG is parsed); where large ones stay."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.shard_outputs import ShardOutputsNeedCheckpointing
from airflow_kueue_provider.operators.task_results import ShardOutputsBlob, keeps_records


def test_shard_outputs_without_checkpointing_is_refused_naming_the_fix() -> None:
    with pytest.raises(ShardOutputsNeedCheckpointing, match=r"reads .* set checkpointing="):
        KueueIndexedJobOperator(task_id="t", queue_name="lq", image="i", shard_outputs=True)
    assert KueueIndexedJobOperator(task_id="u", queue_name="lq", image="i").shard_outputs is False


def test_a_blob_reference_names_each_record_and_keeps_them() -> None:
    where = ShardOutputsBlob("c-1", "runs/x/shards/")
    assert where.blob_name(7) == "runs/x/shards/7/done.json"
    assert keeps_records({"shard_outputs_blob": where.to_dict()}) and not keeps_records({"shard_outputs": {}})
