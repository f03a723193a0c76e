"""What the deployment scenarios share: a mapped operator DAG, waits on task states through the REST API,
and the checks every scenario ends with (one Job per task, every index done, no blocked triggerer)."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from airflow_kueue_provider.kueue.names import DAG_ID_LABEL, MAP_INDEX_LABEL, RUN_ID_LABEL

from ..cluster import HOLD, KueueEnv, wait_for
from ..deployment import AirflowDeployment

MAPPED_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_tasks=16):
    KueueIndexedJobOperator.partial(
        task_id="shards", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions={completions}, parallelism={completions},
        resources={{"requests": {{"cpu": {cpu!r}, "memory": "256Mi"}}}},
        annotations={annotations!r}, retries=3, retry_delay=timedelta(seconds=2),
    ).expand(arguments=[["--part", str(i)] for i in range({count})])
"""
TASK_ID = "shards"
# A stall this close to a triggerer's first trigger start is that trigger module's import.
FIRST_PICKUP_WINDOW = timedelta(seconds=2)
# A triggerer heartbeats every 2 s and is taken for dead after 12 s without one (defaults 5 s and 30 s), so
# another (or a restarted) triggerer claims its triggers within seconds.
FAST_TRIGGERER_FAILOVER = {
    "triggerer.job_heartbeat_sec": "2",
    "triggerer.triggerer_health_check_threshold": "12",
}


def start_mapped_run(
    deployment: AirflowDeployment,
    dag_id: str,
    env: KueueEnv,
    count: int,
    *,
    completions: int = 1,
    cpu: str = "1",
    run_duration: str = "1s",
    hold: bool = False,
) -> str:
    """Write the DAG (``count`` mapped tasks, one Job each), wait until it is parsed, trigger a run."""
    annotations = {"kwok.airflow-kueue.io/run-duration": run_duration, **(HOLD if hold else {})}
    deployment.write_dag(
        dag_id,
        MAPPED_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            queue=env.local_queue,
            completions=completions,
            cpu=cpu,
            annotations=annotations,
            count=count,
        ),
    )
    deployment.rest.wait_for_dag(dag_id)
    return deployment.rest.trigger(dag_id)


def wait_for_states(
    deployment: AirflowDeployment, dag_id: str, run_id: str, what: str, ok: Any, timeout: float
) -> dict[str, int]:
    """Until ``ok(state counts)`` holds; fails at once when a component died that nobody killed."""

    def look() -> dict[str, int] | None:
        deployment.check_alive()
        counts = deployment.rest.states(dag_id, run_id)
        if counts.get("failed"):
            tis = deployment.rest.task_instances(dag_id, run_id)
            failed = [ti["map_index"] for ti in tis if ti["state"] == "failed"]
            raise AssertionError(f"tasks failed while waiting for {what}: {counts} (map indexes {failed})")
        return counts if ok(counts) else None

    return dict(wait_for(what, look, timeout=timeout, interval=2))


def wait_deferred_on_triggerers(
    deployment: AirflowDeployment, dag_id: str, run_id: str, count: int, timeout: float = 600
) -> dict[int | None, int]:
    """Until ``count`` task instances are deferred and the triggerers started last (by the bed) have picked
    up all of their triggers; returns how many each TriggererJob id runs."""
    wait_for_states(
        deployment, dag_id, run_id, f"{count} deferred", lambda c: c.get("deferred", 0) >= count, timeout
    )
    current = set(deployment.triggerer_jobs.values())

    def assigned() -> dict[int | None, int] | None:
        deployment.check_alive()
        where = deployment.trigger_assignment(dag_id)
        return where if sum(n for job, n in where.items() if job in current) >= count else None

    return dict(wait_for(f"every trigger on triggerer jobs {sorted(current)}", assigned, timeout=180))


def wait_for_success(
    deployment: AirflowDeployment, dag_id: str, run_id: str, timeout: float, release: KueueEnv | None = None
) -> dict[str, Any]:
    """Until the run ends; with ``release``, keep letting that namespace's held pods finish meanwhile."""

    def ended() -> dict[str, Any] | None:
        deployment.check_alive()
        if release is not None:
            release.release()
        run = deployment.rest.dag_run(dag_id, run_id)
        return run if run["state"] in ("success", "failed") else None

    run = dict(wait_for(f"run {dag_id}/{run_id} to end", ended, timeout=timeout, interval=2))
    states = deployment.rest.states(dag_id, run_id)
    assert run["state"] == "success" and set(states) == {"success"}, (run["state"], states)
    return run


def assert_one_job_per_task(env: KueueEnv, dag_id: str, run_id: str, count: int) -> list[Any]:
    """Exactly one Job for each mapped task instance of the run, each of them Complete."""
    jobs = [
        j
        for j in env.jobs()
        if (j.metadata.annotations or {}).get(DAG_ID_LABEL) == dag_id
        and j.metadata.annotations.get(RUN_ID_LABEL) == run_id
    ]
    per_index = Counter(int(j.metadata.annotations[MAP_INDEX_LABEL]) for j in jobs)
    duplicates = {i: n for i, n in per_index.items() if n > 1}
    assert not duplicates, f"more than one Job for map indexes {duplicates}"
    assert sorted(per_index) == list(range(count)), f"Jobs for {sorted(per_index)}, expected 0..{count - 1}"
    unfinished = [
        j.metadata.name
        for j in jobs
        if not any(c.type == "Complete" and c.status == "True" for c in (j.status.conditions or []))
    ]
    assert not unfinished, f"Jobs not Complete: {unfinished}"
    return jobs


def state_mismatch_kills(deployment: AirflowDeployment, dag_id: str, run_id: str) -> dict[int, set[int]]:
    """Map index -> tries that Airflow's scheduler failed with "state mismatch".

    A race in Airflow 3.3's scheduler + LocalExecutor: when a trigger fires before the scheduler has taken
    in the deferring process's exit, that stale "success" event, for the same try, meets the resumed
    task instance queued or running and fails it as "killed externally". Short fake Jobs on a busy machine
    hit it; the retry reattaches to the finished Job (no second Job), as a real retry would.
    """
    page = deployment.rest.request(
        "GET",
        "/api/v2/eventLogs",
        params={"dag_id": dag_id, "run_id": run_id, "event": "state mismatch", "limit": 1000},
    )
    kills: dict[int, set[int]] = {}
    for entry in page["event_logs"]:
        kills.setdefault(int(entry["map_index"]), set()).add(int(entry["try_number"]))
    return kills


def assert_results(
    deployment: AirflowDeployment, dag_id: str, run_id: str, jobs: list[Any]
) -> list[dict[str, Any]]:
    """Each task's XCom result names its own Job, with every index done; a task tried more than once only
    because Airflow's scheduler failed the earlier tries (state_mismatch_kills), never for our own doing."""
    by_index = {int(j.metadata.annotations[MAP_INDEX_LABEL]): j for j in jobs}
    tis = deployment.rest.task_instances(dag_id, run_id)
    assert sorted(ti["map_index"] for ti in tis) == sorted(by_index), [ti["map_index"] for ti in tis]
    kills = state_mismatch_kills(deployment, dag_id, run_id)
    for ti in tis:
        earlier = set(range(1, ti["try_number"]))
        assert earlier <= kills.get(ti["map_index"], set()), (
            f"map index {ti['map_index']}: {ti['try_number']} tries; Airflow's state-mismatch kills: {kills}"
        )
    if kills:
        print(f"Airflow's scheduler failed (state mismatch) and retried: {kills}")
    results = []
    for ti in tis:
        result = deployment.rest.xcom(dag_id, run_id, TASK_ID, ti["map_index"])
        job = by_index[ti["map_index"]]
        assert result["job_name"] == job.metadata.name, (ti["map_index"], result)
        assert result["succeeded"] == job.spec.completions and result["failed"] == 0, result
        results.append(result)
    return results


def most_at_once(jobs: list[Any]) -> int:
    """The most Jobs running at the same time, from their startTime (admitted) to completionTime; a start
    and an end in the same second count the end first (the API's times are whole seconds)."""
    edges = sorted(
        [(j.status.start_time, 1) for j in jobs] + [(j.status.completion_time, -1) for j in jobs],
        key=lambda edge: (edge[0], edge[1]),
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


HEAVY_CLIENT_LIBRARIES = ("aiohttp", "kubernetes_asyncio", "kubernetes", "azure")
IMPORT_PROBE = f"""
import sys
import airflow.jobs.triggerer_job_runner  # what a triggerer has imported before its first trigger
before = set(sys.modules)
import airflow_kueue_provider.triggers.kueue_job
new = {{name.split(".")[0] for name in set(sys.modules) - before}}
print(",".join(sorted(new & set({HEAVY_CLIENT_LIBRARIES!r}))))
"""


@functools.cache
def heavy_trigger_imports() -> tuple[str, ...]:
    """The client libraries that importing the trigger's module pulls in (about 1 s of CPU together). A
    triggerer imports a trigger's module on its event loop, at the first trigger of that class."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True, timeout=300
    )
    lines = out.stdout.strip().splitlines()
    return tuple(name for name in (lines[-1] if lines else "").split(",") if name)


def assert_never_blocked(deployment: AirflowDeployment, dag_id: str) -> None:
    """No triggerer logged Airflow's "async thread was blocked" while running or taking over our triggers,
    unless its loop thread was starved of a CPU meanwhile rather than held (loop_sampler).

    One stall per triggerer process is also allowed as it starts its first trigger of ours: Airflow imports a
    trigger's module on its event loop then (about 40 ms of CPU when the module imports only light code,
    which a busy 2-core machine can stretch past the 0.2 s threshold). While the module imports the client
    libraries at its top (heavy_trigger_imports: about 1 s of CPU), the test ends as xfail naming them.
    """
    first = deployment.first_trigger_starts(dag_id)
    unexplained, at_first_pickup, starved = [], [], []
    for job_id, stalls in deployment.blocked_thread_stalls().items():
        pickup = first.get(job_id)
        tolerated = [s for s in stalls if pickup and abs(s.when - pickup) <= FIRST_PICKUP_WINDOW][:1]
        at_first_pickup += [s.describe() for s in tolerated]
        starved += [s.describe() for s in stalls if s not in tolerated and s.starved]
        unexplained += [s.describe() for s in stalls if s not in tolerated and not s.starved]
    assert not unexplained, "the triggerer's event loop was blocked:\n" + "\n".join(unexplained)
    heavy = heavy_trigger_imports()
    if heavy:
        pytest.xfail(
            f"importing the trigger module pulls in {', '.join(heavy)} on the triggerer's event loop at its "
            f"first trigger ({len(at_first_pickup)} stalls then); see airflow_kueue_provider/triggers/"
        )
    if at_first_pickup:
        print("stalls at a triggerer's first trigger (its import):", *at_first_pickup, sep="\n")
    if starved:
        print("stalls while the loop waited for a CPU (no trigger held it):", *starved, sep="\n")


class Stopwatch:
    """Named lap times, printed with ``-s`` and kept in the test's captured output."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self.last))
        self.last = now
        print(f"[{now - self.start:7.1f}s] {name}: {self.laps[-1][1]:.1f}s", flush=True)
