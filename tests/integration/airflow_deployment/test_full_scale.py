"""The seed's sizes on a real deployment: reduced in every ``make test`` (serial pass), full size only with
``-m scale`` (minutes each; the figures are in benchmarks/results/full_scale.md):

- the seed's scenario A: ``example_dags/genomics_nightly.py`` unchanged (1,000 shards at parallelism 50, 3 s
  each) with checkpointing on Azurite: it succeeds, the ledger holds 0-999; wall time against the ideal
  (shards x run time / parallelism) and the apiserver's requests are printed;
- one Job of 100,000 indexes whose fake pods finish at once, followed to the end by the trigger: the task
  succeeds; the trigger's time per status change and the final event's size are printed.

    .venv/bin/python -m pytest -s -m "serial and scale" tests/integration/airflow_deployment
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger, ledger_prefix
from airflow_kueue_provider.kueue.index_set import IndexSet
from devcluster.manifests import SPOT_POOL, fake_node

from ..cluster import Cluster, KueueEnv, short_id, wait_for
from ..deployment import AirflowDeployment
from .scenarios import Stopwatch, assert_never_blocked, wait_for_success

pytestmark = pytest.mark.serial

EXAMPLES = Path(__file__).resolve().parents[3] / "example_dags"
SHARDS, PARALLELISM, SHARD_SECONDS = 1000, 50, 3  # the example's own defaults; 3 s a fake shard
HUGE = 100_000
HUGE_PARALLELISM = 500
HUGE_POD_GC_THRESHOLD = 2000
FULL_SIZE = (pytest.mark.scale, pytest.mark.timeout(4 * 3600))
HUGE_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    KueueIndexedJobOperator(
        task_id="huge", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions={completions}, parallelism={parallelism},
        resources={{"requests": {{"cpu": "10m", "memory": "16Mi"}}}},
        annotations={{"kwok.airflow-kueue.io/run-duration": "0s"}},
    )
"""
READ_RESOURCES = ("jobs", "workloads", "pods", "events", "pendingworkloads")


@pytest.fixture
def pod_gc(request: pytest.FixtureRequest) -> Iterator[None]:
    """For the 100,000-index Job: the controller-manager's PodGC keeps 2,000 finished pods, not Kubernetes'
    default 12,500 (KWOK turns pods over at 37 a second with 2,000 finished pods kept, at 10 with 20,000);
    the default again afterwards. The Job controller has counted a pod before PodGC may delete it."""
    if request.node.callspec.params.get("indexes") != HUGE:
        yield
        return
    _restart_controller_manager({"DEVCLUSTER_TERMINATED_POD_GC_THRESHOLD": str(HUGE_POD_GC_THRESHOLD)})
    try:
        yield
    finally:
        _restart_controller_manager({})


def _restart_controller_manager(env: dict[str, str]) -> None:
    base = {k: v for k, v in os.environ.items() if k != "DEVCLUSTER_TERMINATED_POD_GC_THRESHOLD"}
    subprocess.run(
        [sys.executable, "-m", "devcluster", "restart", "kube-controller-manager"],
        cwd=Path(__file__).resolve().parents[3],
        env={**base, **env},
        check=True,
    )


@pytest.fixture
def spot_nodes(cluster: Cluster) -> Iterator[Callable[[int], list[str]]]:
    """Add fake Spot nodes for one test (the pool has 4 of 110 pods each); removed afterwards."""
    made: list[str] = []

    def add(count: int) -> list[str]:
        marker = short_id()
        for i in range(count):
            name = f"aks-spot-scale-{marker}-{i}"
            cluster.core.create_node(fake_node(name, SPOT_POOL, zone=1 + i % 3))
            made.append(name)
        return made

    yield add
    for name in made:
        cluster.core.delete_node(name)


class JobTrace:
    """The Job's finished and active index counts every second, from a thread of its own: a recorded run
    for the ETA's unit tests (``RECORD_RUN_DIR``: where to write ``<name>.json``)."""

    def __init__(self, cluster: Cluster, namespace: str, label_selector: str) -> None:
        self.samples: list[tuple[float, int, int, int]] = []  # (epoch s, completed, failed, active)
        self.polls = 0  # its own LISTs of jobs, left out of the request counts
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._poll, args=(cluster, namespace, label_selector), daemon=True
        )
        self._thread.start()

    def _poll(self, cluster: Cluster, namespace: str, label_selector: str) -> None:
        while not self._stop.wait(1.0):
            self.polls += 1
            with contextlib.suppress(Exception):
                jobs = cluster.batch.list_namespaced_job(namespace, label_selector=label_selector).items
                if jobs and jobs[0].status:
                    st = jobs[0].status
                    done = len(IndexSet.parse(st.completed_indexes))
                    failed = len(IndexSet.parse(st.failed_indexes))
                    self.samples.append((time.time(), done, failed, st.active or 0))

    def save(self, name: str, completions: int) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        where = os.environ.get("RECORD_RUN_DIR")
        if where:
            path = Path(where) / f"{name}.json"
            path.write_text(json.dumps({"completions": completions, "samples": self.samples}) + "\n")
            print(f"recorded run: {path}")


def restart_with(deployment: AirflowDeployment, extra: dict[str, str]) -> None:
    """Every component but the API server again, with ``extra`` in its environment (a DAG file that reads
    its settings from the environment, like the examples, is parsed by the DAG processor and the tasks)."""
    deployment.env.update(extra)
    for name in ("scheduler", "dag-processor"):
        deployment.components[name].stop()
        deployment.start_component(name)
    for name in [n for n in deployment.components if n.startswith("triggerer")]:
        deployment.components[name].stop()
        deployment.start_triggerer(name)
    deployment.wait_healthy()


def request_counts(cluster: Cluster) -> Counter[str]:
    """kube-apiserver's ``apiserver_request_total`` by ``resource verb`` (every client, cumulative)."""
    text = cluster.get_text("/metrics")
    counts: Counter[str] = Counter()
    for line in str(text).splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            counts[f"{labels.get('resource', '')} {labels.get('verb', '')}"] += int(
                float(line.rsplit(" ", 1)[1])
            )
    return counts


def requests_line(before: Counter[str], after: Counter[str], trace: JobTrace) -> str:
    delta = after - before - Counter({"jobs LIST": trace.polls})
    ours = {key: n for key, n in delta.items() if key.split(" ")[0] in READ_RESOURCES}
    return f"{sum(delta.values())} apiserver requests in all (every client); " + ", ".join(
        f"{key} {n}" for key, n in sorted(ours.items(), key=lambda kv: -kv[1])
    )


@pytest.mark.parametrize(
    "shards", [pytest.param(100, id="100-shards"), pytest.param(SHARDS, id="full-size", marks=FULL_SIZE)]
)
def test_genomics_nightly(
    shards: int,
    deployment: AirflowDeployment,
    kueue_env_factory: Callable[..., KueueEnv],
    devcluster_env: dict[str, str],
    cluster: Cluster,
    spot_nodes: Callable[[int], list[str]],
) -> None:
    spot_nodes(2)  # 16 shards of 1 CPU and 4Gi fit a node: 6 nodes hold 96, whatever else runs
    env = kueue_env_factory(cpu=str(PARALLELISM), memory=f"{4 * PARALLELISM}Gi")  # 1 CPU, 4Gi a shard
    container = f"genomics-{short_id()}"
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    watch = Stopwatch()
    _forget_dag(deployment, "genomics_nightly")  # a run of it earlier in this module: start afresh
    for key in [key for key in deployment.env if key.startswith("GENOMICS_")]:
        del deployment.env[key]
    restart_with(
        deployment,
        {
            "AIRFLOW_CONN_KUEUE_BLOB_DEFAULT": json.dumps(
                {"conn_type": "wasb", "extra": {"connection_string": conn_string}}
            ),
            "GENOMICS_NAMESPACE": env.namespace,
            "GENOMICS_QUEUE": env.local_queue,
            "GENOMICS_BLOB_CONTAINER": container,
            "GENOMICS_RUN_DURATION": f"{SHARD_SECONDS}s",
            # at full size, the DAG file's own defaults: unchanged
            **({"GENOMICS_SHARDS": str(shards)} if shards != SHARDS else {}),
        },
    )
    watch.lap("deployment restarted with the example's settings")
    before = request_counts(cluster)
    trace = JobTrace(cluster, env.namespace, "app.kubernetes.io/managed-by=airflow-kueue-provider")
    shutil.copy(EXAMPLES / "genomics_nightly.py", deployment.home / "dags" / "genomics_nightly.py")
    # The DAG is nightly (catchup off): once parsed, the scheduler starts the last night's run at once.
    # That run is the one under test; a triggered run beside it would wait (max_active_runs=1).
    run_id = wait_for("the nightly run", lambda: _first_run_id(deployment, "genomics_nightly"), timeout=300)
    watch.lap("DAG parsed, nightly run started")
    run = wait_for_success(deployment, "genomics_nightly", run_id, timeout=3600)
    trace.save(f"genomics_{shards}_shards", shards)
    watch.lap("run succeeded")
    after = request_counts(cluster)

    result = deployment.rest.xcom("genomics_nightly", run_id, "align_chromosome_shards")
    assert result["completed_indexes"] == f"0-{shards - 1}" and result["failed"] == 0, result
    service = BlobServiceClient.from_connection_string(conn_string)
    try:
        prefix = ledger_prefix("genomics_nightly", run_id, "align_chromosome_shards")
        blob = service.get_blob_client(container, f"{prefix}/ledger.json").download_blob().readall()
        ledger = RunLedger.from_dict(json.loads(blob))
        assert str(ledger.completed) == f"0-{shards - 1}", ledger
    finally:
        for made in service.list_containers(name_starts_with=container):
            service.delete_container(made.name)
    job = cluster.batch.read_namespaced_job(result["job_name"], env.namespace)
    job_seconds = (job.status.completion_time - job.status.start_time).total_seconds()
    ideal = shards * SHARD_SECONDS / PARALLELISM
    print(
        f"scenario A: {shards} shards x {SHARD_SECONDS} s at parallelism {PARALLELISM}: "
        f"Job {job_seconds:.0f} s ({job_seconds / ideal:.2f}x the ideal {ideal:.0f} s), "
        f"queued {result['queued_seconds']} s, DAG run {_seconds(run):.0f} s; "
        f"{requests_line(before, after, trace)}"
    )
    assert_never_blocked(deployment, "genomics_nightly")


@pytest.mark.parametrize(
    ("indexes", "parallelism"),
    [
        pytest.param(1000, 100, id="1000-indexes"),
        pytest.param(HUGE, HUGE_PARALLELISM, id="full-size", marks=FULL_SIZE),
    ],
)
def test_one_big_job_is_followed_to_the_end(
    indexes: int,
    parallelism: int,
    deployment: AirflowDeployment,
    kueue_env_factory: Callable[..., KueueEnv],
    cluster: Cluster,
    spot_nodes: Callable[[int], list[str]],
    pod_gc: None,
) -> None:
    spot_nodes(4)  # 8 x 110 pod slots for 500 pods in flight
    env = kueue_env_factory(cpu="64", memory="256Gi")
    dag_id = f"big_job_{indexes}"
    deployment.write_dag(
        dag_id,
        HUGE_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            queue=env.local_queue,
            completions=indexes,
            parallelism=parallelism,
        ),
    )
    deployment.rest.wait_for_dag(dag_id)
    before = request_counts(cluster)
    run_id = deployment.rest.trigger(dag_id)
    trace = JobTrace(cluster, env.namespace, "app.kubernetes.io/managed-by=airflow-kueue-provider")
    run = wait_for_success(deployment, dag_id, run_id, timeout=4 * 3600)
    trace.save(f"job_of_{indexes}_indexes", indexes)
    after = request_counts(cluster)

    result = deployment.rest.xcom(dag_id, run_id, "huge")
    assert result["completed_indexes"] == f"0-{indexes - 1}" and result["succeeded"] == indexes, result
    print(
        f"{indexes} indexes at parallelism {parallelism}: DAG run {_seconds(run):.0f} s, Job "
        f"{result['running_seconds']} s; final event {len(json.dumps(result))} bytes; "
        f"{requests_line(before, after, trace)}"
    )
    assert_never_blocked(deployment, dag_id)


def _forget_dag(deployment: AirflowDeployment, dag_id: str) -> None:
    """Remove the DAG file and the DAG with its runs from the database (nothing when it is not there)."""
    path = deployment.home / "dags" / f"{dag_id}.py"
    if path.exists():
        path.unlink()
        deployment.rest.request("DELETE", f"/api/v2/dags/{dag_id}")


def _first_run_id(deployment: AirflowDeployment, dag_id: str) -> str | None:
    if deployment.rest.dag(dag_id) is None:
        return None  # not parsed yet
    runs = deployment.rest.request("GET", f"/api/v2/dags/{dag_id}/dagRuns")
    return str(runs["dag_runs"][0]["dag_run_id"]) if runs.get("dag_runs") else None


def _seconds(run: dict[str, Any]) -> float:
    start, end = (datetime.fromisoformat(run[k].replace("Z", "+00:00")) for k in ("start_date", "end_date"))
    return (end - start).total_seconds()
