"""Several shards per pod on the process nodes: the real operator runs the Monte Carlo pricer packed
(``shards_per_pod``), against Azurite.

- Decreasing packs (a skewed ``expected_shard_duration`` range) map each index to its pack the same way on
  the operator's and the pod's side, and a retry runs only the failed shards.
- A shard that fails on the first try fails alone: its pod goes on with the others of its pack, the done
  markers tell the ledger which finished, and the second try runs that one shard.
- Kueue sees fewer, longer pods: partial admission of a packed Job runs every shard.
- Kueue's tail hand-back (reclaimable pods) counts pods: a second team is admitted in a packed Job's tail.
- A Kueue preemption mid-pack: each pod flushes the shard in progress and stops before the next; after the
  readmission each pod of the index skips its pack's done shards and resumes that one from its checkpoint.

Either way every item of every shard exactly once, every output exact.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator, KueueJobFailed
from devcluster.manifests import HOLD_ANNOTATION

from ..cluster import HOLD, Cluster, KueueEnv, indexed_job, is_true, short_id, wait_for
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture
from ..worker.eviction_bed import (
    PRICER,
    account,
    command_job,
    done_outputs,
    expected_pricer_output,
    items_per_shard,
    pricer_arguments,
    read_items_log,
)
from .tail_quota_queues import add_second_team

CONN_ID = "kueue_blob_packing"
INDEX = "batch.kubernetes.io/job-completion-index"


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


def _ti(try_number: int) -> SimpleNamespace:
    return SimpleNamespace(
        dag_id="packed", task_id="price", run_id="manual__1", try_number=try_number, map_index=-1
    )


def _in_background(operator: KueueIndexedJobOperator) -> tuple[threading.Thread, dict[str, object]]:
    """The operator's first try in a thread; ``outcome`` gets its ``result`` or its ``error``."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = operator.execute({"ti": _ti(1)})  # type: ignore[arg-type]
        except BaseException as exc:
            outcome["error"] = exc

    task = threading.Thread(target=run, daemon=True)
    task.start()
    return task, outcome


def pricer(
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    arguments: list[str],
    *,
    shards: int,
    per_pod: int | None,
    **kwargs: object,
) -> KueueIndexedJobOperator:
    return KueueIndexedJobOperator(
        task_id="price",
        namespace=queues.namespace,
        queue_name=queues.local_queue,
        image="example.invalid/pricer:1",
        cmds=["python", "-m", PRICER],
        arguments=arguments,
        completions=shards,
        parallelism=2,
        shards_per_pod=per_pod,
        spot=True,
        resources={"requests": {"cpu": "250m", "memory": "256Mi"}},
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container, keep_after_success=True),
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_packed_run_retries_only_the_shard_that_failed(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    tmp_path: Path,
) -> None:
    log, shards, items = tmp_path / "items", 8, 6
    arguments = [*pricer_arguments(log, items=items, every=3, item_seconds=0.02), "--fail-once", "2"]
    operator = pricer(queues, blob, arguments, shards=shards, per_pod=4, backoff_limit_per_index=0)

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


def test_decreasing_packs_run_every_shard_once_and_a_retry_runs_only_the_failed_ones(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    tmp_path: Path,
) -> None:
    """12 shards of 0.1-5 s at parallelism 2: decreasing packs of 3, 3, 3, 2, 1. Shard 4 fails in the middle
    of index 1's pack and shard 11 is index 4's single shard; the retry runs those two, nothing else."""
    log, shards, items = tmp_path / "items", 12, 4
    arguments = [*pricer_arguments(log, items=items, every=2, item_seconds=0.02), "--fail-once", "4,11"]
    operator = pricer(
        queues,
        blob,
        arguments,
        shards=shards,
        per_pod=None,
        expected_shard_duration=(0.1, 5),
        backoff_limit_per_index=0,
    )

    with pytest.raises(KueueJobFailed):
        operator.execute({"ti": _ti(1)})  # type: ignore[arg-type]
    (first,) = queues.jobs()
    env = {e.name: e.value for e in first.spec.template.spec.containers[0].env if e.value is not None}
    assert (first.spec.completions, env["AIRFLOW_KUEUE_SHARDS_PER_POD"]) == (5, "3x3,2x1,1x1"), env
    assert first.status.failed_indexes == "1,4", first.status

    result = operator.execute({"ti": _ti(2)})  # type: ignore[arg-type]
    assert (result["completed_indexes"], result["failed_indexes"], result["attempts"]) == ("0-11", "", 2), (
        result
    )
    (second,) = [j for j in queues.jobs() if j.metadata.name != first.metadata.name]
    env = {e.name: e.value for e in second.spec.template.spec.containers[0].env if e.value is not None}
    assert env["AIRFLOW_KUEUE_SHARDS"] == "4,11", env
    # Shards 4 and 11 failed before their first item: every item of every shard was processed exactly once.
    assert account(read_items_log(log), range(shards), items) == account([], [], 0)
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, items) for s in range(shards)
    }


def test_a_preemption_mid_pack_resumes_the_shard_in_progress_and_skips_the_done_ones(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    tmp_path: Path,
) -> None:
    low, high = queues.priority_class("low", 10), queues.priority_class("high", 1000)
    log, shards, items = tmp_path / "items", 4, 40
    arguments = pricer_arguments(log, items=items, every=5, item_seconds=0.1)
    operator = pricer(queues, blob, arguments, shards=shards, per_pod=2, priority_class=low)
    task, outcome = _in_background(operator)
    # Pods of 2 shards: index 0 runs 0 then 1, index 1 runs 2 then 3. Preempt once each pod is past item 7 of
    # its second shard: the first shards are done, the second ones in progress.
    wait_for(
        "both pods in their second shard",
        lambda: (
            all(items_per_shard(read_items_log(log)).get(s, 0) >= 7 for s in (1, 3)) or "error" in outcome
        ),
        timeout=180,
        interval=0.05,
    )
    queues.create_job(command_job("urgent", "lq", ["sleep", "3"], pods=2, cpu="500m", priority=high))
    task.join(timeout=300)
    assert "error" not in outcome and "result" in outcome, outcome
    result = outcome["result"]
    assert isinstance(result, dict) and result["completed_indexes"] == "0-3", result
    assert result["evictions"] >= 1, result
    assert account(read_items_log(log), range(shards), items) == account([], [], 0), "each item exactly once"
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, items) for s in range(shards)
    }


def test_a_packed_job_too_big_for_the_free_quota_is_partly_admitted_and_runs_every_shard(
    kueue_env_factory: Any, blob: SimpleNamespace
) -> None:
    """Kueue sees pods, not shards: 24 shards as 6 pods of 4, 3 of which fit (partial admission)."""
    env = kueue_env_factory(cpu="4", memory="16Gi")
    other = env.create_job(indexed_job("other", env.local_queue, completions=1, cpu="1", hold=True))
    wait_for("the other Job admitted", lambda: is_true(env.workload(other), "Admitted"))
    operator = KueueIndexedJobOperator(
        task_id="price",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/pricer:1",
        completions=24,
        parallelism=6,
        min_parallelism=2,
        shards_per_pod=4,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "2s"},
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
    )
    result = operator.execute({"ti": _ti(1)})  # type: ignore[arg-type]
    assert (result["completed_indexes"], result["admitted_parallelism"]) == ("0-23", 3), result
    (ours,) = [j for j in env.jobs() if j.metadata.name != "other"]
    assert (ours.spec.completions, ours.metadata.annotations["kueue.x-k8s.io/job-min-parallelism"]) == (
        6,
        "2",
    )


def test_a_packed_jobs_tail_hands_its_quota_back_while_the_task_runs(
    kueue_env_factory: Any, blob: SimpleNamespace
) -> None:
    """Kueue's reclaimable pods count pods, not shards: 16 shards as 8 pods of 2 at parallelism 4. Once 2
    pods are left, 2 pods' quota goes back and a second team's Job is admitted while the task still runs;
    the result measures the quota released and every shard completes."""
    env = kueue_env_factory(cpu="4", memory="64Gi")
    add_second_team(env)
    operator = KueueIndexedJobOperator(
        task_id="price",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/pricer:1",
        completions=16,
        parallelism=4,
        shards_per_pod=2,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations=dict(HOLD),
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
    )
    task, outcome = _in_background(operator)
    job = wait_for("the task's Job", lambda: next(iter(env.jobs()), None), timeout=60)
    name = job.metadata.name
    assert job.spec.completions == 8, "16 shards as 8 pods of 2"

    def running() -> set[str]:
        return {p["metadata"]["annotations"][INDEX] for p in env.running_pods(name)}

    wait_for("pods 0-3 running", lambda: running() == {"0", "1", "2", "3"}, timeout=120)
    other = env.create_job(indexed_job("team-b", "team-b", completions=2, cpu="1", run_duration="1s"))
    env.release(name)
    wait_for("pods 4-7 running", lambda: running() == {"4", "5", "6", "7"}, timeout=120)
    assert not is_true(env.workload(other), "Admitted"), "no quota for team B while 4 pods are left"
    for pod in env.running_pods(name):
        if pod["metadata"]["annotations"][INDEX] in ("4", "5"):
            env.cluster.core.patch_namespaced_pod(
                pod["metadata"]["name"],
                env.namespace,
                {"metadata": {"annotations": {HOLD_ANNOTATION: "released"}}},
            )
    wait_for("team B admitted in the tail", lambda: is_true(env.workload(other), "Admitted"), timeout=120)
    assert running() == {"6", "7"}, "the task still runs"
    env.release_until_finished(name)
    task.join(timeout=120)
    assert "error" not in outcome and "result" in outcome, outcome
    result = outcome["result"]
    assert isinstance(result, dict) and result["completed_indexes"] == "0-15", result
    assert result["quota_released_pod_seconds"] > 0, result
