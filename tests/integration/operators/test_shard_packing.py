"""Several shards per pod on the process nodes: the real operator runs the Monte Carlo pricer packed
(``shards_per_pod``), against Azurite.

A shard that fails on the first try fails alone: its pod goes on with the others of its pack, the done markers
tell the ledger which finished, and the second try runs that one shard; every item of every shard exactly
once, every output exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.failures import KueueJobFailed
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import Cluster, KueueEnv, delete_kueue_env, short_id
from ..process_node import process_queues
from ..worker.eviction_bed import (
    PRICER,
    account,
    done_outputs,
    expected_pricer_output,
    pricer_arguments,
    read_items_log,
)

CONN_ID = "kueue_blob_packing"


@pytest.fixture
def blob(devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    conn = {"conn_type": "wasb", "extra": {"connection_string": conn_string}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
    container = f"pack-{short_id()}"
    service = BlobServiceClient.from_connection_string(conn_string)
    yield SimpleNamespace(container=container, service=service)
    for made in service.list_containers(name_starts_with=container):
        service.delete_container(made.name)


@pytest.fixture
def queues(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[KueueEnv]:
    env = process_queues(cluster, request.node.name, cpu="1")
    yield env
    delete_kueue_env(env)


def _ti(try_number: int) -> SimpleNamespace:
    return SimpleNamespace(
        dag_id="packed", task_id="price", run_id="manual__1", try_number=try_number, map_index=-1
    )


def test_a_packed_run_retries_only_the_shard_that_failed(
    cluster: Cluster, queues: KueueEnv, blob: SimpleNamespace, tmp_path: Path
) -> None:
    log, shards, items = tmp_path / "items", 8, 6
    arguments = [*pricer_arguments(log, items=items, every=3, item_seconds=0.02), "--fail-once", "2"]
    operator = KueueIndexedJobOperator(
        task_id="price",
        namespace=queues.namespace,
        queue_name=queues.local_queue,
        image="example.invalid/pricer:1",
        cmds=["python", "-m", PRICER],
        arguments=arguments,
        completions=shards,
        parallelism=2,
        shards_per_pod=4,
        backoff_limit_per_index=0,
        spot=True,
        resources={"requests": {"cpu": "250m", "memory": "256Mi"}},
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container, keep_after_success=True),
    )

    with pytest.raises(KueueJobFailed):
        operator.execute({"ti": _ti(1)})  # type: ignore[arg-type]
    (first,) = queues.jobs()
    assert first.spec.completions == 2, "8 shards as 2 pods of 4"

    result = operator.execute({"ti": _ti(2)})  # type: ignore[arg-type]
    assert (result["completed_indexes"], result["failed_indexes"], result["attempts"]) == ("0-7", "", 2), (
        result
    )
    (second,) = [j for j in queues.jobs() if j.metadata.name != first.metadata.name]
    env = {e.name: e.value for e in second.spec.template.spec.containers[0].env if e.value is not None}
    assert second.spec.completions == 1 and env["AIRFLOW_KUEUE_SHARDS"] == "2", env
    # Shard 2 failed before its first item: every item of every shard was processed exactly once.
    assert account(read_items_log(log), range(shards), items) == account([], [], 0)
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, items) for s in range(shards)
    }
