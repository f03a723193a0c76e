"""A stopped pod's shards taken over by the running pods of its Job (``worker/pack_handoff``), on the
process nodes: the real operator runs the Monte Carlo pricer packed, 3 pods of 2 shards, against Azurite.

One pod is evicted in its first shard (the Eviction API, a DisruptionTarget the pod failure policy ignores):
it flushes that shard, writes the release record of its pack's rest and exits 143. The Job controller gives
its index the next pod only after its failure backoff (10 s); the other two pods finish their own packs
first and take the released shards over, the first one resuming from the flushed checkpoint. The next pod
of the evicted index finds its pack done, or waits for the shard another pod still runs, and exits 0.
Every item of every shard exactly once, every output exact.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace

from kubernetes.client.rest import ApiException

from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import Cluster, KueueEnv, wait_for
from ..operators.test_shard_packing import (
    CONN_ID,
    INDEX,
    _in_background,
    blob,  # noqa: F401 - the fixture
)
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture
from .eviction_bed import (
    PRICER,
    account,
    done_outputs,
    done_records,
    expected_pricer_output,
    items_per_shard,
    pricer_arguments,
    read_items_log,
)

SHARDS, ITEMS = 6, 40


def packed_pricer(
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    log: Path,
    *,
    shards: int,
    parallelism: int,
) -> KueueIndexedJobOperator:
    """The pricer's ``shards`` shards of ``ITEMS`` items (0.1 s each), 2 a pod, ``parallelism`` pods."""
    return KueueIndexedJobOperator(
        task_id="price",
        namespace=queues.namespace,
        queue_name=queues.local_queue,
        image="example.invalid/pricer:1",
        cmds=["python", "-m", PRICER],
        arguments=pricer_arguments(log, items=ITEMS, every=5, item_seconds=0.1),
        completions=shards,
        parallelism=parallelism,
        shards_per_pod=2,
        spot=True,
        resources={"requests": {"cpu": "250m", "memory": "256Mi"}},
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container, keep_after_success=True),
    )


def test_a_running_pod_takes_over_the_rest_of_an_evicted_pack(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
) -> None:
    log = tmp_path / "items"
    operator = packed_pricer(queues, blob, log, shards=SHARDS, parallelism=3)
    task, outcome = _in_background(operator)
    # Index 0 runs shards 0 then 1: evict it once it is past item 7 of shard 0.
    wait_for(
        "index 0 in its first shard",
        lambda: items_per_shard(read_items_log(log)).get(0, 0) >= 8 or "error" in outcome,
        timeout=180,
        interval=0.05,
    )
    pods = cluster.core.list_namespaced_pod(queues.namespace).items
    victim = next(
        p.metadata.name
        for p in pods
        if (p.metadata.annotations or {}).get(INDEX) == "0" and p.status.phase == "Running"
    )
    with contextlib.suppress(ApiException):
        cluster.core.create_namespaced_pod_eviction(
            victim, queues.namespace, {"apiVersion": "policy/v1", "kind": "Eviction",
                                       "metadata": {"name": victim, "namespace": queues.namespace}},
        )  # fmt: skip
    task.join(timeout=300)
    assert "error" not in outcome and "result" in outcome, outcome
    result = outcome["result"]
    assert isinstance(result, dict) and result["completed_indexes"] == "0-5", result
    logged = read_items_log(log)
    assert account(logged, range(SHARDS), ITEMS) == account([], [], 0), "each item exactly once"
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, ITEMS) for s in range(SHARDS)
    }
    records = done_records(blob.service, blob.container)
    taken = {s: records[s]["index"] for s in (0, 1) if records[s]["index"] != 0}
    assert taken, f"shards 0 and 1 were both finished by index 0's pods: {records}"
    # Shard 0 was resumed where the evicted pod flushed it, not started again.
    first_pod = {e.pod for e in logged if e.shard == 0 and e.item == 0}
    assert {e.pod for e in logged if e.shard == 0} - first_pod, "shard 0 went on in another pod"


def test_an_evicted_pod_whose_rest_a_running_pod_finishes_within_its_grace_ends_succeeded(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two pods of 2 shards; the one behind is evicted when the other has under a second left. The one ahead
    takes the released rest over as its pack ends; the evicted pod, waiting in its grace, sees the done
    records and exits 0: the process node reports it Succeeded (as a kubelet does for a deleted pod whose
    containers exit 0), its index is done, and no next pod is created, which per index the Job controller
    would have held back 10 s."""
    log = tmp_path / "items"
    operator = packed_pricer(queues, blob, log, shards=4, parallelism=2)
    task, outcome = _in_background(operator)

    def second_shards() -> dict[int, int]:  # index -> items of its second shard (index i runs 2i, 2i+1)
        counts = items_per_shard(read_items_log(log))
        return {index: counts.get(2 * index + 1, 0) for index in (0, 1)}

    wait_for(
        "one pod under a second from its pack's end",
        lambda: max(second_shards().values()) >= ITEMS - 9 or "error" in outcome,
        timeout=180,
        interval=0.05,
    )
    progress = second_shards()
    behind = min(progress, key=lambda index: progress[index])
    pods = cluster.core.list_namespaced_pod(queues.namespace).items
    victim = next(
        p.metadata.name
        for p in pods
        if (p.metadata.annotations or {}).get(INDEX) == str(behind) and p.status.phase == "Running"
    )
    cluster.core.create_namespaced_pod_eviction(
        victim, queues.namespace, {"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": victim, "namespace": queues.namespace}},
    )  # fmt: skip
    phases: dict[str, tuple[str, str]] = {}
    while task.is_alive():
        for p in cluster.core.list_namespaced_pod(queues.namespace).items:
            phases[p.metadata.name] = ((p.metadata.annotations or {}).get(INDEX, ""), p.status.phase)
        task.join(timeout=0.2)
    assert "error" not in outcome and "result" in outcome, outcome
    assert phases[victim] == (str(behind), "Succeeded"), phases
    assert [name for name, (index, _) in phases.items() if index == str(behind)] == [victim], "no next pod"
    logged = read_items_log(log)
    assert account(logged, range(4), ITEMS) == account([], [], 0), "each item exactly once"
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, ITEMS) for s in range(4)
    }
    records = done_records(blob.service, blob.container)
    assert {records[s]["index"] for s in (2 * behind, 2 * behind + 1)} != {behind}, records
