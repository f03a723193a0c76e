"""Checkpoint on eviction, end to end: the real operator runs the Monte Carlo pricer as processes on the
process nodes, and real evictions stop its shards.

- A Kueue preemption (a higher-priority Job in the same ClusterQueue): every running shard gets SIGTERM and
  flushes (journal: SIGTERM, then exit 143), the Workload is requeued and readmitted, each shard resumes from
  its flushed checkpoint, the task succeeds; every item of every shard exactly once, outputs exact.
- A Spot node lost as AKS loses it (taint, pods evicted with grace and a DisruptionTarget condition, the Node
  deleted): the shards of that node restart on the other process node and resume; the same accounting.
- A shard killed without grace (force delete): it resumes from its last periodic checkpoint; fewer items
  redone than one checkpoint interval, every item at least once, outputs exact.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.kueue.index_set import IndexSet

from ..airflow_runner import AirflowHome, DagRun
from ..cluster import Cluster, KueueEnv, delete_kueue_env, short_id, wait_for
from ..operators.test_indexed_job_queueing import returned_result
from ..process_node import pod_log, process_nodes, process_queues
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture
from .eviction_bed import (
    PRICER,
    account,
    command_job,
    done_outputs,
    expected_pricer_output,
    items_per_shard,
    pod_records,
    pod_spans,
    pricer_arguments,
    read_items_log,
    shard_spans,
)

CONN_ID = "kueue_blob_eviction"
GRACE = 15  # the pods' terminationGracePeriodSeconds: the SDK gets 10 s (the operator keeps 5 back)
FLUSHED = re.compile(r"SIGTERM, checkpoint \d+ \(progress (\d+)\) written in ([0-9.]+)s")

PRICER_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="price", namespace={namespace!r}, queue_name="lq", image="example.invalid/pricer:1",
        cmds=["python", "-m", {module!r}], arguments={arguments!r},
        completions={shards}, parallelism={shards}, spot=True, priority_class={priority!r},
        backoff_limit_per_index=2,
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        job_template={{"apiVersion": "batch/v1", "kind": "Job",
                      "spec": {{"template": {{"spec": {{"terminationGracePeriodSeconds": {grace}}}}}}}}},
        checkpointing=Checkpointing(conn_id={conn_id!r}, container={container!r}, keep_after_success=True),
    )
"""


@pytest.fixture
def blob(devcluster_env: dict[str, str], airflow_home: AirflowHome) -> Iterator[SimpleNamespace]:
    """A fresh base container and the Airflow connection the operator signs the pods' SAS with."""
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    conn = json.dumps({"conn_type": "wasb", "extra": {"connection_string": conn_string}})
    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = airflow_home.env[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = conn
    container = f"evict-{short_id()}"
    service = BlobServiceClient.from_connection_string(conn_string)
    yield SimpleNamespace(container=container, service=service)
    for made in service.list_containers(name_starts_with=container):
        with contextlib.suppress(Exception):
            service.delete_container(made.name)


def start_pricer(
    airflow_home: AirflowHome, blob: SimpleNamespace, env: KueueEnv, log: Path, dag_id: str, *, shards: int,
    items: int, every: int, item_seconds: float, priority: str,
) -> Any:  # fmt: skip
    """The operator's task in the background (``airflow dags test``): the pricer, ``shards`` shards."""
    arguments = pricer_arguments(log, items=items, every=every, item_seconds=item_seconds)
    airflow_home.write_dag(
        dag_id,
        PRICER_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            module=PRICER,
            arguments=arguments,
            shards=shards,
            priority=priority,
            grace=GRACE,
            conn_id=CONN_ID,
            container=blob.container,
        ),
    )
    return airflow_home.start_dag(dag_id)


def wait_every_shard_past(
    log: Path, shards: int, items: int, env: KueueEnv, background: Any, timeout: float = 240
) -> None:
    def past() -> bool:
        assert background.proc.poll() is None, f"the task ended early: {background.output()[-6000:]}"
        counts = items_per_shard(read_items_log(log))
        return len(counts) == shards and min(counts.values()) >= items

    def explain() -> object:
        pods = [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                for j in env.jobs() for p in env.pods(j.metadata.name)]  # fmt: skip
        return {
            "items": items_per_shard(read_items_log(log)),
            "pods": pods,
            "task": background.output()[-3000:],
        }

    wait_for(f"every shard past item {items}", past, timeout=timeout, interval=0.05, explain=explain)


def finished(background: Any, timeout: float = 300) -> DagRun:
    try:
        return background.wait(timeout=timeout)  # type: ignore[no-any-return]
    finally:
        background.kill()


def assert_flushed_and_resumed(
    cluster: Cluster, env: KueueEnv, job: str, log: Path, stopped_indexes: list[int]
) -> None:
    """Each pod stopped with grace: SIGTERM alone, exit 143 (or 0: the pods that took its released shard
    over finished it within its grace, ``pack_handoff.wait_for_rest``), its flush held every item it logged,
    and the next pod of its shard started right after that item."""
    logged = read_items_log(log)
    spans = pod_spans(logged)
    records = pod_records(cluster, job, env.namespace)
    stopped = sorted((r for r in records.values() if r.signals), key=lambda r: r.index or 0)
    assert [r.index for r in stopped] == stopped_indexes, records
    for rec in stopped:
        assert [sig for sig, _ in rec.signals] == ["SIGTERM"] and rec.exit_code in (143, 0), rec
        name = rec.pod.split("/", 1)[1]
        shard, _, last = spans[name]
        flushed = FLUSHED.search(pod_log(rec.pod, "main", node=rec.node, uid=rec.uid))
        assert flushed and int(flushed[1]) == last + 1, (rec, spans)
        by_shard = shard_spans(logged)  # its shard may go on in a pod that took it over after its own
        later = [f for (pod, s), (f, _) in by_shard.items() if s == shard and pod != name and f > last]
        assert min(later) == last + 1, (shard, by_shard)


def test_a_preempted_job_flushes_every_shard_and_resumes_each_item_exactly_once(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    airflow_home: AirflowHome,
    blob: SimpleNamespace,
    tmp_path: Path,
) -> None:
    low, high = queues.priority_class("low", 10), queues.priority_class("high", 1000)
    log, shards, items = tmp_path / "items", 4, 24
    background = start_pricer(
        airflow_home, blob, queues, log, "preempted", shards=shards, items=items, every=5, item_seconds=0.15,
        priority=low,
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        stack.callback(background.kill)
        wait_every_shard_past(
            log, shards, 7, queues, background
        )  # the 4 shards fill the ClusterQueue's 1 CPU
        queues.create_job(command_job("urgent", "lq", ["sleep", "3"], pods=2, cpu="500m", priority=high))
        run = finished(background)

    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["evictions"] >= 1 and "Preempted" in result["eviction_causes"], result
    assert account(read_items_log(log), range(shards), items) == account([], [], 0), "each item exactly once"
    assert_flushed_and_resumed(cluster, queues, result["job_name"], log, [0, 1, 2, 3])
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, items) for s in range(shards)
    }


def running_pods(cluster: Cluster, env: KueueEnv, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in env.pods(job)
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def the_job(env: KueueEnv) -> str | None:
    names = [j.metadata.name for j in env.jobs() if j.metadata.name != "urgent"]
    return names[0] if names else None


def index_of(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])


def test_a_shard_killed_without_grace_resumes_from_its_last_periodic_checkpoint(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    airflow_home: AirflowHome,
    blob: SimpleNamespace,
    tmp_path: Path,
) -> None:
    log, shards, items, every = tmp_path / "items", 2, 20, 5
    background = start_pricer(
        airflow_home, blob, queues, log, "killed", shards=shards, items=items, every=every, item_seconds=0.2,
        priority=queues.priority_class("low", 10),
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        stack.callback(background.kill)
        job = wait_for("the pricer's Job", lambda: the_job(queues), timeout=240)

        def mid_interval() -> dict[str, Any] | None:  # shard 0 past a checkpoint, 2-3 items into the next
            done = items_per_shard(read_items_log(log)).get(0, 0)
            pods = [p for p in running_pods(cluster, queues, job) if index_of(p) == 0]
            return pods[0] if pods and done >= every and done % every in (2, 3) else None

        victim = wait_for("shard 0 between two checkpoints", mid_interval, timeout=240, interval=0.02)
        cluster.core.delete_namespaced_pod(
            victim["metadata"]["name"], queues.namespace, grace_period_seconds=0
        )  # as PodGC does for a node that is gone: no grace, SIGKILL at once
        run = finished(background)

    assert run.succeeded, run.output[-6000:]
    logged = read_items_log(log)
    accounting = account(logged, range(shards), items)
    assert accounting.missing == [], "every item at least once"
    killed = victim["metadata"]["name"]
    _, _, last = pod_spans(logged)[killed]
    redone = sorted(item for (shard, item), n in accounting.repeated.items() if n == 2 and shard == 0)
    assert len(accounting.repeated) == len(redone) and len(redone) < every, accounting
    assert redone == list(range(last + 1 - len(redone), last + 1)), "only the items since the last checkpoint"
    assert (last + 1 - len(redone)) % every == 0, "resumed from a periodic checkpoint"
    records = pod_records(cluster, job, queues.namespace)
    rec = records[f"{queues.namespace}/{killed}"]
    assert [sig for sig, _ in rec.signals] == ["SIGKILL"] and rec.exit_code == 137, rec
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, items) for s in range(shards)
    }


SPOT_EVICTION_TAINTS = [
    {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoExecute"},
    {"key": "ToBeDeletedByClusterAutoscaler", "value": str(int(time.time())), "effect": "NoSchedule"},
]


@pytest.mark.serial
def test_a_lost_spot_node_moves_its_shards_to_the_other_node_where_they_resume_exactly_once(
    cluster: Cluster, airflow_home: AirflowHome, blob: SimpleNamespace, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    nodes = process_nodes(cluster)
    assert len(nodes) >= 2, f"two process nodes needed, found {nodes}"
    env = process_queues(cluster, request.node.name, cpu="2")
    try:
        _spot_node_loss(cluster, env, airflow_home, blob, tmp_path)
    finally:
        delete_kueue_env(env)
        for node in nodes:  # the lost node registers again: Ready, without the eviction's taints
            wait_for(
                f"{node} back, Ready and untainted", functools.partial(_ready_untainted, cluster, node), 120
            )


def _spot_node_loss(
    cluster: Cluster, env: KueueEnv, airflow_home: AirflowHome, blob: SimpleNamespace, tmp_path: Path
) -> None:
    log, shards, items = tmp_path / "items", 4, 24
    background = start_pricer(
        airflow_home, blob, env, log, "spot_loss", shards=shards, items=items, every=5, item_seconds=0.15,
        priority=env.priority_class("low", 10),
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        stack.callback(background.kill)
        job = wait_for("the pricer's Job", lambda: the_job(env), timeout=240)
        wait_every_shard_past(log, shards, 7, env, background)
        by_node: dict[str, list[dict[str, Any]]] = {}
        for pod in running_pods(cluster, env, job):
            by_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
        victim, pods = max(by_node.items(), key=lambda kv: len(kv[1]))
        # AKS: the Spot VM is being evicted: the node is tainted, its pods evicted with their grace period
        # (DisruptionTarget), then the Node object goes.
        taints = (cluster.core.read_node(victim).spec.taints or []) + SPOT_EVICTION_TAINTS
        cluster.core.patch_node(
            victim, {"spec": {"taints": [cluster.api.sanitize_for_serialization(t) for t in taints]}}
        )
        for pod in pods:
            name = pod["metadata"]["name"]
            with contextlib.suppress(ApiException):  # the taint manager may have deleted it first
                cluster.core.create_namespaced_pod_eviction(
                    name, env.namespace, {"apiVersion": "policy/v1", "kind": "Eviction",
                                          "metadata": {"name": name, "namespace": env.namespace}},
                )  # fmt: skip
        evicted = {f"{env.namespace}/{p['metadata']['name']}" for p in pods}
        wait_for(
            "the evicted pods' processes ended",
            lambda: all(pod_records(cluster, job, env.namespace)[p].exited for p in evicted),
            timeout=GRACE + 30,
        )
        indexes = sorted(index_of(p) for p in pods)

        def replaced() -> bool:  # every evicted index has its new pod placed (on the other node: the taint),
            # or is done: its evicted pod exited 0 once the other node's pods finished its shard in its grace
            placed = {index_of(p) for p in running_pods(cluster, env, job) if p["spec"].get("nodeName")}
            status = (cluster.job(env.namespace, job) or {}).get("status") or {}
            done = IndexSet.parse(str(status.get("completedIndexes") or ""))
            return all(index in placed or index in done for index in indexes)

        wait_for("the evicted indexes running again, or done", replaced, timeout=120)
        cluster.core.delete_node(victim)  # what is left of the VM goes (the bed's node registers again)
        run = finished(background)

    assert run.succeeded, run.output[-6000:]
    assert account(read_items_log(log), range(shards), items) == account([], [], 0), "each item exactly once"
    assert_flushed_and_resumed(cluster, env, job, log, indexes)
    records = pod_records(cluster, job, env.namespace)
    node_of = {r.pod.split("/", 1)[1]: r.node for r in records.values()}
    gone = {p.split("/", 1)[1] for p in evicted}
    shards_left = {shard for name, (shard, _, _) in pod_spans(read_items_log(log)).items() if name in gone}
    moved = {node_of[e.pod] for e in read_items_log(log) if e.shard in shards_left and e.pod not in gone}
    assert moved == set(process_nodes(cluster)) - {victim}, records  # by their next pods or by take-over
    assert done_outputs(blob.service, blob.container) == {
        s: expected_pricer_output(s, items) for s in range(shards)
    }


def _ready_untainted(cluster: Cluster, name: str) -> bool:
    """Ready, and none of the eviction's taints (the node's own two NoSchedule taints stay)."""
    try:
        node = cluster.core.read_node(name)
    except ApiException:
        return False
    taints = {(t.key, t.effect) for t in node.spec.taints or []}
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    return ready and not taints & {(t["key"], t["effect"]) for t in SPOT_EVICTION_TAINTS}
