"""``shard_outputs=True`` on the bed: real pricer shards on the process nodes record their outputs with
``mark_done`` in Azurite; the operator's result carries them for a reduce step, read before the clean-up;
too large for XCom, the result points at the done records, which are then kept."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_kueue_provider.operators import task_results
from airflow_kueue_provider.operators.task_results import ShardOutputsBlob

from ..cluster import Cluster, KueueEnv
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture
from ..worker.eviction_bed import done_outputs, expected_pricer_output, pricer_arguments
from .test_shard_packing import _ti, blob, pricer  # noqa: F401 - blob is the fixture

SHARDS, ITEMS = 4, 4


def test_the_result_carries_each_shard_s_output_and_the_records_go_after(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
) -> None:
    arguments = pricer_arguments(tmp_path / "items", items=ITEMS, every=2, item_seconds=0.02)
    operator = pricer(queues, blob, arguments, shards=SHARDS, per_pod=None, shard_outputs=True)
    operator._checkpointing = operator.checkpointing = type(operator.checkpointing)(
        conn_id=operator.checkpointing.conn_id, container=blob.container
    )  # keep_after_success off: the records are deleted after success, so they must be read before
    result = operator.execute({"ti": _ti(1)})  # type: ignore[arg-type]
    assert result["shard_outputs"] == {str(s): expected_pricer_output(s, ITEMS) for s in range(SHARDS)}
    assert "shard_outputs_blob" not in result
    assert done_outputs(blob.service, blob.container) == {}, "cleaned up after they were read"


def test_outputs_too_large_for_xcom_stay_in_their_records_and_the_result_says_where(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(task_results, "INLINE_RESULTS_BYTES", 64)
    arguments = pricer_arguments(tmp_path / "items", items=ITEMS, every=2, item_seconds=0.02)
    operator = pricer(queues, blob, arguments, shards=SHARDS, per_pod=None, shard_outputs=True)
    operator._checkpointing = operator.checkpointing = type(operator.checkpointing)(
        conn_id=operator.checkpointing.conn_id, container=blob.container
    )
    result = operator.execute({"ti": _ti(1)})  # type: ignore[arg-type]
    assert "shard_outputs" not in result and result["shard_outputs_count"] == SHARDS, result
    where = ShardOutputsBlob(**result["shard_outputs_blob"])
    client = blob.service.get_container_client(where.container)
    read = {
        s: json.loads(client.download_blob(where.blob_name(s)).readall())["output"] for s in range(SHARDS)
    }
    assert read == {s: expected_pricer_output(s, ITEMS) for s in range(SHARDS)}
