"""``shard_items=`` on the process nodes: real pods read their items and return a per-item result.

- Inline items (a list in the pods' env), packed 3 shards a pod: two shards fail on the first try, the retry
  runs only those two (in one pod) and each still reads its own item.
- A JSON-lines blob of 1,005 items (two staged chunks), packed 250 a pod: the operator stages it once for
  the task instance; a shard of the second chunk fails on the first try, and its retry reads the item staged
  by the first try even though the source blob changed in between.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG, task

from airflow_kueue_provider.decorators.kueue_task import KueueDecoratedOperator
from airflow_kueue_provider.kueue.spec.shard_items import ShardItemsBlob
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueJobFailed

from ..cluster import Cluster, KueueEnv
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture
from .test_shard_packing import (
    CONN_ID,
    _ti,
    blob,  # noqa: F401 - the fixture
)

REGIONS = [{"region": f"r{i:02d}", "n": 3 * i} for i in range(12)]


def _env_of(job: Any) -> dict[str, str]:
    return {e.name: e.value for e in job.spec.template.spec.containers[0].env if e.value is not None}


def _describe(queues: KueueEnv, blob: SimpleNamespace, keep: bool = True) -> dict[str, Any]:  # noqa: F811
    return {
        "namespace": queues.namespace,
        "queue_name": queues.local_queue,
        "image": "example.invalid/shard:1",
        "parallelism": 4,
        "backoff_limit_per_index": 0,
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
        "deferrable": False,
        "checkpointing": Checkpointing(conn_id=CONN_ID, container=blob.container, keep_after_success=keep),
    }


def test_inline_items_reach_their_shards_and_a_retry_of_two_keeps_them_aligned(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
) -> None:
    failing, marks = [4, 10], tmp_path / "failed-once"
    with DAG("shard_items_inline", schedule=None, start_date=datetime(2026, 1, 1)):

        @task.kueue(task_id="per_region", shard_items=REGIONS, shards_per_pod=3, **_describe(queues, blob))
        def per_region(shard: Any, failing: list[int], marks: str) -> str:
            import os

            mark = f"{marks}-{shard.shard_id}"
            if shard.shard_id in failing and not os.path.exists(mark):
                open(mark, "w").close()
                raise RuntimeError(f"shard {shard.shard_id} fails on its first run")
            return f"{shard.item['region']}:{shard.item['n']}"

        op = per_region(failing, str(marks)).operator  # type: ignore[call-arg,attr-defined,arg-type,misc]
    assert isinstance(op, KueueDecoratedOperator) and op.completions == len(REGIONS)

    with pytest.raises(KueueJobFailed):
        op.execute({"ti": _ti(1)})  # type: ignore[typeddict-item]
    (first,) = queues.jobs()
    assert json.loads(_env_of(first)["AIRFLOW_KUEUE_SHARD_ITEMS"]) == REGIONS
    result = op.execute({"ti": _ti(2)})  # type: ignore[typeddict-item]

    (retry,) = [j for j in queues.jobs() if j.metadata.name != first.metadata.name]
    env = _env_of(retry)
    assert (retry.spec.completions, env["AIRFLOW_KUEUE_SHARDS"]) == (1, "4,10"), "both in one pod"
    assert (result["completed_indexes"], result["attempts"], result["retried_shards"]) == ("0-11", 2, 2)
    assert result["results"] == {str(i): f"{r['region']}:{r['n']}" for i, r in enumerate(REGIONS)}


def test_a_blob_of_json_lines_is_staged_once_and_a_retry_reads_the_staged_items(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
) -> None:
    count, failing, marks = 1005, [1001], tmp_path / "failed-once"
    items = [{"file": f"part-{i:05d}.csv", "rows": i * 7} for i in range(count)]
    base = blob.service.get_container_client(blob.container)
    base.create_container()
    source = base.get_blob_client("inputs/items.jsonl")
    source.upload_blob("".join(json.dumps(item) + "\n" for item in items).encode())
    with DAG("shard_items_blob", schedule=None, start_date=datetime(2026, 1, 1)):

        @task.kueue(
            task_id="per_file",
            shard_items=ShardItemsBlob("inputs/items.jsonl"),
            completions=count,
            shards_per_pod=250,
            **_describe(queues, blob, keep=False),
        )
        def per_file(shard: Any, failing: list[int], marks: str) -> str:
            import os

            mark = f"{marks}-{shard.shard_id}"
            if shard.shard_id in failing and not os.path.exists(mark):
                open(mark, "w").close()
                raise RuntimeError(f"shard {shard.shard_id} fails on its first run")
            return f"{shard.item['file']}:{shard.item['rows']}"

        op = per_file(failing, str(marks)).operator  # type: ignore[call-arg,attr-defined,arg-type,misc]

    with pytest.raises(KueueJobFailed):
        op.execute({"ti": _ti(1)})
    (first,) = queues.jobs()
    env = _env_of(first)
    assert env["AIRFLOW_KUEUE_SHARD_ITEMS_BLOB"] == "blob://inputs/items.jsonl"
    assert "AIRFLOW_KUEUE_SHARD_ITEMS" not in env, "only the reference travels in the env"
    assert _staged(blob) == ["0.json", "1.json", "index.json"], "two chunks, then the index"
    # The source changes between the tries: the task instance keeps the items its first try staged.
    source.upload_blob(b'{"file": "changed", "rows": -1}\n' * count, overwrite=True)
    result = op.execute({"ti": _ti(2)})

    (retry,) = [j for j in queues.jobs() if j.metadata.name != first.metadata.name]
    assert _env_of(retry)["AIRFLOW_KUEUE_SHARDS"] == "1001"
    assert (result["completed_indexes"], result["attempts"], result["retried_shards"]) == ("0-1004", 2, 1)
    assert result["results"] == {str(i): f"{it['file']}:{it['rows']}" for i, it in enumerate(items)}
    shard_containers = list(blob.service.list_containers(name_starts_with=f"{blob.container}-"))
    assert shard_containers == [], "the clean-up after success took the staged items and the container"


def _staged(blob: SimpleNamespace) -> list[str]:  # noqa: F811
    return sorted(
        b.name.rsplit("/", 1)[-1]
        for c in blob.service.list_containers(name_starts_with=f"{blob.container}-")
        for b in blob.service.get_container_client(c.name).list_blobs()
        if "/shards/items/" in b.name
    )
