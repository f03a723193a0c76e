"""The UI plugin's pages and JSON on the real cluster: a queue with a waiting Job, and a task's Jobs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_kueue_provider.hooks.identity_key import identity_seal
from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.plugins import dashboard_data
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.pending_positions import SHARED
from airflow_kueue_provider.plugins.views.admission_timeline import NOISY_REASONS
from airflow_kueue_provider.watch.event_index import EventIndex

from ..cluster import Cluster, KueueEnv, indexed_job, is_true, short_id, wait_for
from ..request_count import counted_client

RUN_1S = {"kwok.airflow-kueue.io/run-duration": "1s"}
TI = {"dag_id": "ui", "run_id": f"manual__2026-11-30-{short_id()}", "task_id": "shards"}
"""Unique per session, so the every-namespace lookup finds this session's Jobs only."""


@pytest.fixture(autouse=True)
def events(monkeypatch: pytest.MonkeyPatch) -> EventIndex:
    """The pages' shared Events, fresh: the process's own holds feeds of other tests' namespaces."""
    fresh = EventIndex(skip_reasons=NOISY_REASONS)
    monkeypatch.setattr(dashboard_data, "EVENTS", fresh)
    return fresh


def _client(namespaces: list[str]) -> TestClient:
    # No Airflow login here: the login dependency is Airflow's own; test_login_is_required checks it is on.
    return TestClient(
        create_app(KueueHook, lambda: namespaces, dependencies=[], task_access=[], queues_access=[])
    )


def _run_task(env: KueueEnv, try_number: int, fail: str) -> dict[str, Any]:
    """Run the operator in this process (blocking mode) to its end, as a task try would."""
    op = KueueIndexedJobOperator(
        task_id=TI["task_id"],
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=6,
        backoff_limit_per_index=0,
        max_failed_indexes=1,
        deferrable=False,
        resources={"requests": {"cpu": "500m", "memory": "1Gi"}},  # 6 x 500m fits the 4-CPU quota
        annotations={"kwok.airflow-kueue.io/run-duration": "1s", "kwok.airflow-kueue.io/fail-indexes": fail},
    )
    ti = SimpleNamespace(
        dag_id=TI["dag_id"], task_id=TI["task_id"], run_id=TI["run_id"], try_number=try_number, map_index=-1
    )
    result: dict[str, Any] = op.execute({"ti": ti})  # type: ignore[arg-type]
    return result


def test_task_view_shows_each_try_with_its_index_grid_and_timeline(
    kueue_env_factory: Callable[..., KueueEnv], events: EventIndex
) -> None:
    env = kueue_env_factory(cpu="4")
    first = _run_task(env, 1, fail="4")
    assert first["failed_indexes"] == "4"

    jobs = _client([env.namespace]).get("/api/task", params=TI).json()["jobs"]
    assert [j["name"] for j in jobs] == [first["job_name"]]
    (job,) = jobs
    assert job["try_number"] == "1" and job["cluster_queue"] == env.cluster_queue
    assert job["grid"]["counts"] == {"done": 5, "failed": 1, "running": 0, "waiting": 0}
    assert {"first": 4, "last": 4, "state": "failed"} in job["grid"]["runs"]
    steps = [step["what"] for step in job["timeline"]]
    for expected in ("submitted", "queued", "quota reserved", "admitted"):
        assert expected in steps, steps
    assert steps.index("submitted") < steps.index("admitted")
    assert job["timeline"] == sorted(job["timeline"], key=lambda s: s["at"])

    html = _client([env.namespace]).get("/task", params=TI)
    assert html.status_code == 200 and first["job_name"] in html.text
    assert html.text.count('class="cell ') == 6 and "Admission timeline" in html.text

    # Pages read the Events from the namespace's feeds once they are current (watch/event_index.py)
    conn = KueueHook().kubernetes_conn_id
    wait_for("the Events feeds current", lambda: all(_events_current(events, conn, env.namespace)), 30)
    lists = events.lists
    second = _run_task(env, 2, fail="")  # the retry: the failed index's Job is not reused
    jobs = _client([]).get("/api/task", params=TI).json()["jobs"]  # every namespace
    assert [(j["name"], j["try_number"]) for j in jobs] == [
        (first["job_name"], "1"),
        (second["job_name"], "2"),
    ]
    assert jobs[1]["grid"]["counts"]["done"] == 6
    if all(_events_current(events, conn, env.namespace)):  # a watch round may end between: then a LIST
        assert events.lists == lists, "no LIST of Events"
    steps = [step["what"] for step in jobs[1]["timeline"]]
    assert "created workload" in steps, f"Kueue's Event on the new Job, from the watch: {steps}"
    html = _client([env.namespace]).get("/task", params=TI).text
    assert html.index(second["job_name"]) < html.index(first["job_name"]), "newest try first"
    assert _client([env.namespace]).get("/api/task", params={**TI, "run_id": "other"}).json() == {"jobs": []}


def _events_current(events: EventIndex, conn: str, namespace: str) -> list[bool]:
    return [events.current(conn, namespace, kind) for kind in ("Job", "Workload")]


def test_queue_dashboard_shows_waiting_and_admitted_work(kueue_env_factory: Callable[..., KueueEnv]) -> None:
    env = kueue_env_factory(cpu="4")
    env.create_job(indexed_job("holder", env.local_queue, completions=4, cpu="1", run_duration="10m"))
    env.create_job(indexed_job("waiter", env.local_queue, completions=4, cpu="1"))

    def row() -> dict[str, Any] | None:
        rows = _client([env.namespace]).get("/api/queues").json()["queues"]
        found = [r for r in rows if r["namespace"] == env.namespace]
        return found[0] if found and found[0]["admitted"] == 1 and found[0]["pending"] == 1 else None

    queue = wait_for("one admitted and one pending Workload", row, timeout=60)
    assert queue["cluster_queue"] == env.cluster_queue and queue["active"]
    cpu = next(u for u in queue["usage"] if u["resource"] == "cpu")
    assert (cpu["flavor"], cpu["nominal"], cpu["reserved"]) == (env.flavor, "4", "4")

    page = _client([env.namespace]).get("/queues")
    assert page.status_code == 200 and env.cluster_queue in page.text and "4 / 4" in page.text


def test_a_task_page_costs_a_few_requests_whatever_its_jobs_pod_count(
    kueue_env_factory: Callable[..., KueueEnv], cluster: Cluster, tmp_path: Path, events: EventIndex
) -> None:
    """Counted by the API server, for the client the page uses: the same for 4 pods and for 600."""
    env = kueue_env_factory(cpu="64", memory="256Gi")
    run_id = f"manual__counted-{short_id()}"
    sizes = {"small": 4, "big": 600}
    for task, completions in sizes.items():
        identity = AirflowIdentity("ui", task, run_id)
        manifest = indexed_job(
            f"{task}-{short_id()}",
            env.local_queue,
            completions=completions,
            parallelism=min(completions, 200),
            cpu="10m",
            memory="16Mi",
            run_duration="0s",
            labels={**identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        )
        name = manifest["metadata"]["name"]
        seal = identity_seal().annotations("Job", env.namespace, name, identity)  # docs/tenancy.md
        manifest["metadata"]["annotations"] = {**identity.annotations(), **seal}
        env.create_job(manifest)
    for job in env.jobs():
        wait_for(
            f"{job.metadata.name} complete", lambda n=job.metadata.name: is_true(env.job(n), "Complete"), 300
        )

    with counted_client(cluster, env.namespace, tmp_path) as counted:
        app = _unauthenticated_app(counted.conn_id, env.namespace)
        params = {"dag_id": "ui", "run_id": run_id}
        app.get("/task", params={**params, "task_id": "small"})  # the first page makes the client
        current = lambda: all(_events_current(events, counted.conn_id, env.namespace))  # noqa: E731
        wait_for("the Events feeds current", current, timeout=30)
        costs = {}
        for task in sizes:
            before = counted.counts()
            page = app.get("/task", params={**params, "task_id": task})
            costs[task] = counted.counts() - before
            assert page.status_code == 200 and page.text.count("<section data-job=") == 1, page.text[:500]
    print(f"requests per task page load: {dict(costs['small'])} (4 pods), {dict(costs['big'])} (600 pods)")
    assert costs["small"] == costs["big"], costs
    assert costs["big"]["pods"] == 0 and sum(costs["big"].values()) <= 4, costs
    if current():  # a feed's watch round may end in between: then its page LISTs the Events
        assert sum(costs["big"].values()) <= 2, f"the Job and its Workload, the Events from memory: {costs}"


def test_login_is_required() -> None:
    client = TestClient(create_app(KueueHook, lambda: []))
    assert client.get("/api/queues").status_code == 401


@pytest.fixture(autouse=True)
def _kubernetes_default(devcluster_env: dict[str, str]) -> None:
    """``kubernetes_default`` comes from the devcluster env (AIRFLOW_CONN_KUBERNETES_DEFAULT)."""


def test_the_task_view_names_the_multikueue_worker_cluster_that_ran_the_job(
    multikueue_env_factory: Callable[..., Any],
) -> None:
    mk = multikueue_env_factory(worker_cpu=["0", "8"])  # worker-1 has no quota: worker-2 runs it
    ti = {**TI, "dag_id": "ui_multikueue"}
    op = KueueIndexedJobOperator(
        task_id=ti["task_id"],
        namespace=mk.manager.namespace,
        queue_name=mk.manager.local_queue,
        image="example.invalid/shard:1",
        completions=4,
        deferrable=False,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "1s"},
    )
    context = SimpleNamespace(**ti, try_number=1, map_index=-1)
    result = op.execute({"ti": context})  # type: ignore[arg-type]
    assert result["worker_cluster"] == "worker-2"

    (job,) = _client([mk.manager.namespace]).get("/api/task", params=ti).json()["jobs"]
    assert job["worker_cluster"] == "worker-2" and job["grid"]["counts"]["done"] == 4
    html = _client([mk.manager.namespace]).get("/task", params=ti).text
    assert "worker cluster worker-2 (MultiKueue)" in html


def test_the_task_view_of_a_jobset_task_shows_each_replicated_job_with_the_jobsets_workload(
    kueue_env_factory: Callable[..., KueueEnv],
) -> None:
    env = kueue_env_factory(cpu="8")
    ti = {**TI, "dag_id": "ui_jobset"}
    requests = {"requests": {"cpu": "1", "memory": "1Gi"}}
    op = KueueJobSetOperator(
        task_id=ti["task_id"],
        namespace=env.namespace,
        queue_name=env.local_queue,
        deferrable=False,
        replicated_jobs=[
            KueueReplicatedJob(
                "coordinator", image="example.invalid/c:1", resources=requests, annotations=RUN_1S
            ),
            KueueReplicatedJob(
                "workers", image="example.invalid/w:1", completions=6, resources=requests, annotations=RUN_1S
            ),
        ],
    )
    result = op.execute({"ti": SimpleNamespace(**ti, try_number=1, map_index=-1)})  # type: ignore[arg-type]
    name = result["jobset_name"]

    panels = _client([env.namespace]).get("/api/task", params=ti).json()["jobs"]
    by_job = {p["parent"]["part"]: p for p in panels}
    assert sorted(by_job) == ["coordinator", "workers"], panels
    workers = by_job["workers"]
    assert workers["name"] == f"{name}-workers-0"
    assert workers["parent"] == {"kind": "JobSet", "name": name, "part": "workers"}
    # Kueue admitted the JobSet as one Workload: both Jobs show it and its ClusterQueue.
    assert workers["workload_name"] == result["workload_name"] == by_job["coordinator"]["workload_name"]
    assert workers["cluster_queue"] == env.cluster_queue and workers["grid"]["counts"]["done"] == 6
    html = _client([env.namespace]).get("/task", params=ti).text
    assert f"replicated job workers of JobSet {name}" in html


def test_views_of_queued_tasks_share_one_read_of_their_local_queues_pending_list(
    kueue_env_factory: Callable[..., KueueEnv], cluster: Cluster, tmp_path: Path
) -> None:
    """Two queued tasks behind a Job that holds the quota: each view says its position, and three views within
    30 s read the LocalQueue's pending list once between them (plugins/pending_positions)."""
    env = kueue_env_factory(cpu="1", memory="4Gi")
    env.create_job(
        indexed_job(f"holder-{short_id()}", env.local_queue, completions=1, cpu="1", run_duration="10m")
    )
    run_id = f"manual__queued-{short_id()}"
    for task in ("first", "second"):
        identity = AirflowIdentity("ui", task, run_id)
        manifest = indexed_job(
            f"{task}-{short_id()}",
            env.local_queue,
            completions=1,
            cpu="1",
            run_duration="0s",
            labels={**identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE},
        )
        name = manifest["metadata"]["name"]
        seal = identity_seal().annotations("Job", env.namespace, name, identity)
        manifest["metadata"]["annotations"] = {**identity.annotations(), **seal}
        env.create_job(manifest)

    def pending() -> int:
        listed = cluster.custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", env.namespace, "workloads"
        )["items"]
        return sum(1 for w in listed if not is_true(w, "QuotaReserved"))

    wait_for("both task Workloads queued behind the holder", lambda: pending() == 2, 60)
    reads_before = SHARED.reads
    with counted_client(cluster, env.namespace, tmp_path) as counted:
        app = _unauthenticated_app(counted.conn_id, env.namespace)
        params = {"dag_id": "ui", "run_id": run_id}
        app.get("/api/task", params={**params, "task_id": "first"})  # the first view makes the client
        costs, lines = [], []
        for task in ("first", "second"):
            before = counted.counts()
            answer = app.get("/api/task", params={**params, "task_id": task})
            costs.append(sum((counted.counts() - before).values()))
            assert answer.status_code == 200, answer.text[:500]
            lines.append(answer.json()["jobs"][0]["summary"])
    print(f"requests per view of a queued task, after the first: {costs}")
    assert all("position" in line for line in lines), lines
    assert SHARED.reads - reads_before == 1, "one read of the pending list for the three views"


def _unauthenticated_app(conn_id: str, namespace: str) -> TestClient:
    """The plugin's app reading ``namespace`` through ``conn_id``, with no access checks (the costs alone)."""
    return TestClient(
        create_app(
            lambda: KueueHook(conn_id),
            lambda: [namespace],
            dependencies=[],
            task_access=[],
            queues_access=[],
        )
    )
