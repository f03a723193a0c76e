"""The forecast at submit on the bed: a deadline the forecast already puts out of reach escalates at the
trigger's first check, before any pod of the Job has finished; the result keeps the forecast and how far
off it was; a higher-priority task does not count the lower-priority Jobs pending ahead, and sees those it
does count with what they ask for; a Job's reclaimed indexes hold no quota; a night that waited
longer than the model said teaches the next night's forecast that wait."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.hooks.forecast_inputs import read_priority, read_queue_room
from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.hooks.shard_history_store import history_blob
from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.kueue.checkpoints.shard_history import ShardHistory
from airflow_kueue_provider.kueue.names import PRIORITY_CLASS_LABEL
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.forecast_step import with_outcome
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, indexed_job, wait_for
from .conftest import CONN_ID
from .test_indexed_job_queueing import returned_result


class Ti:
    """The task instance the operator reads (identity) and keeps its forecast in (XCom)."""

    dag_id, task_id, run_id, try_number, map_index = "forecast", "shards", "manual__1", 1, -1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: str, key: str, map_indexes: int) -> Any:
        return self.xcom.get(key)


def test_a_deadline_the_submit_forecast_puts_out_of_reach_escalates_at_the_first_check(
    kueue_env_factory: Any,
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="2", memory="16Gi")  # two pods of 1 CPU at once
    escalated: list[tuple[float, int]] = []

    def notify(context: Any, info: Any) -> None:  # when, and how many pods had finished by then
        finished = sum((j.status.succeeded or 0) + (j.status.failed or 0) for j in env.jobs())
        escalated.append((time.time(), finished))

    task = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=4,
        parallelism=2,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "15s"},  # the Job ends in about 32 s
        deadline=timedelta(seconds=40),
        deadline_margin=5,
        on_deadline_risk={"notify": notify},
        deferrable=False,
    )
    # Earlier nights say each shard runs 60 s: 2 waves of 65 s on 2 CPUs, far past 40 s less 5 s.
    history = LearnedLengths(4, dict.fromkeys(range(4), 60.0), ("night-1", "night-2", "night-3"))
    task._learned_for_forecast = lambda shard_count: history  # type: ignore[method-assign]
    context: Any = {"ti": Ti()}
    result = task.execute(context)

    (job,) = env.jobs()
    created = job.metadata.creation_timestamp.timestamp()
    assert escalated, "on_deadline_risk was never taken"
    (when, finished), *_ = escalated
    print(f"escalated {when - created:.1f} s after the create, {finished} pods finished by then")
    assert finished == 0, f"escalated {when - created:.1f} s after the create, after {finished} pods finished"
    assert when - created < 15, f"escalated {when - created:.1f} s after the create"
    first = result["eta_history"][0]
    assert first["at_risk"] is True, result["eta_history"]  # the trigger's first check
    assert [s["step"] for s in result["escalations"]] == ["notify"], result["escalations"]
    forecast = result["forecast"]
    assert forecast["nights"] == 3 and forecast["basis"].startswith("from 3 nights of shard history, 2 CPU")
    assert forecast["error_seconds"] < -60, forecast  # 15 s shards, not 60: it ended far earlier
    assert result["completed_indexes"] == "0-3"


FORECAST_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.operators.forecast_step import with_outcome
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator


class FromHistory(KueueIndexedJobOperator):
    def _learned_for_forecast(self, shard_count):  # earlier nights: 6 s a shard
        return LearnedLengths(shard_count, dict.fromkeys(range(shard_count), 6.0), ("night-1", "night-2"))


with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    FromHistory(
        task_id="shards", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions=4, parallelism=2, resources={{"requests": {{"cpu": "1", "memory": "1Gi"}}}},
        annotations={{"kwok.airflow-kueue.io/run-duration": "6s"}},
        inline_wait=None,  # deferred: the forecast crosses the deferral (test_inline_wait.py: inline)
    )
"""


def test_the_forecast_crosses_the_deferral_into_the_result_with_how_far_off_it_was(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="2", memory="16Gi")
    airflow_home.write_dag(
        "forecast_deferred",
        FORECAST_DAG.format(dag_id="forecast_deferred", namespace=env.namespace, queue=env.local_queue),
    )
    run = airflow_home.test_dag("forecast_deferred", timeout=300)
    assert run.succeeded, run.output[-6000:]
    assert "forecast: start ~" in run.output and "forecast was " in run.output, run.output[-6000:]
    forecast = returned_result(run)["forecast"]
    assert forecast["nights"] == 2, forecast
    start, finish = (datetime.fromisoformat(forecast[k]) for k in ("start", "finish"))
    assert (finish - start).total_seconds() >= 2 * (5 + 6), forecast  # 2 waves of a 6 s shard and a start
    assert forecast["basis"].endswith(", admitted"), forecast  # made again once Kueue admitted the Job
    assert isinstance(forecast["at_submit"]["error_seconds"], float), forecast  # the first one, kept
    assert isinstance(forecast["error_seconds"], float) and forecast["actual_finish"], forecast


def test_a_higher_priority_forecast_does_not_count_the_lower_priority_jobs_pending(
    kueue_env_factory: Any,
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="2", memory="16Gi")
    low, high = env.priority_class("align", 100), env.priority_class("gather", 300)
    labels = {PRIORITY_CLASS_LABEL: low}
    env.create_job(indexed_job("blocker", env.local_queue, completions=2, hold=True, labels=labels))
    hook = KueueHook("kubernetes_default")
    wait_for("the blocker admitted", lambda: env.running_pods("blocker"), 60)
    for name in ("align-1", "align-2"):  # pending behind the blocker's 2 CPUs
        env.create_job(indexed_job(name, env.local_queue, completions=1, labels=labels))

    def pending() -> int:
        queue = env.cluster.kueue_get("clusterqueues", env.cluster_queue)
        listed = (hook.pending_workloads(env.namespace, env.local_queue) or {}).get("items") or []
        status = int((queue.get("status") or {}).get("pendingWorkloads") or 0)
        return status if status == len(listed) == 2 else 0

    wait_for("two align Jobs pending, listed by the visibility API", pending, 60)

    def ahead(priority_class: str) -> int:
        manifest = {"metadata": {"labels": {PRIORITY_CLASS_LABEL: priority_class}}}
        priority = read_priority(hook, manifest)
        return read_queue_room(hook, env.namespace, env.local_queue, priority).ahead

    assert ahead(high) == 0  # gather (300) jumps the two align Jobs (100)
    assert ahead(low) == 2  # another align Job queues behind them
    room = read_queue_room(hook, env.namespace, env.local_queue, 0)
    (held,) = room.held  # the blocker: admitted, holding its 2 CPUs; the pending ones hold nothing
    assert held.usage.cpu == 2 and 0 <= held.held_for < 120, held
    assert held.flavor in {f.name for f in room.flavors}, (held, room.flavors)
    # The two waiting are seen with what they ask for (one 1-CPU pod each), not as Jobs like the task's.
    assert [(w.usage.cpu, w.usage.pods) for w in room.waiting if w.usage] == [(1, 1), (1, 1)], room.waiting


def test_the_quota_of_a_jobs_finished_indexes_that_kueue_reclaimed_is_not_held(
    kueue_env_factory: Any,
) -> None:
    """Kueue admits others into the quota of a Job's finished indexes (its Workload's reclaimablePods) while
    the Job runs on: the forecast counts only the pods left, as Kueue does."""
    env: KueueEnv = kueue_env_factory(cpu="4", memory="16Gi")
    env.create_job(
        indexed_job(
            "tail",
            env.local_queue,
            completions=3,
            annotations={"kwok.airflow-kueue.io/run-duration-2": "600s"},
        )
    )
    hook = KueueHook("kubernetes_default")

    def reclaimed() -> int:
        found = env.workload(env.job("tail") or {"metadata": {"uid": ""}}) or {}
        return sum(int(r.get("count") or 0) for r in (found.get("status") or {}).get("reclaimablePods") or [])

    wait_for("Kueue counting the two finished indexes as reclaimable", lambda: reclaimed() == 2, 60)
    (held,) = read_queue_room(hook, env.namespace, env.local_queue, 0).held
    assert (held.usage.cpu, held.usage.memory) == (1, 2**30), held


def test_jobs_created_in_the_same_second_are_forecast_again_from_their_place_in_the_queue(
    kueue_env_factory: Any,
) -> None:
    """Two tasks forecast at the same moment, each blind to the other's Job (neither exists yet); once
    Kueue has tried their Workloads, the one admitted says so and the one left waiting counts the other
    ahead, and is nearer its Job's real end than its first forecast was. (Each task submits only and hands
    on, as with ``wait_for_completion=False``: Airflow runs every task in a process of its own.)"""
    env: KueueEnv = kueue_env_factory(cpu="2", memory="16Gi")  # one Job of two 1-CPU pods at a time
    both_forecast = threading.Barrier(2, timeout=60)

    class Racing(KueueIndexedJobOperator):
        def _learned_for_forecast(self, shard_count: int) -> LearnedLengths:
            lengths = dict.fromkeys(range(shard_count), 8.0)
            return LearnedLengths(shard_count, lengths, ("night-1",), pod_start_seconds=1.0)  # the bed's

        def _before_create(self, client: Any, manifest: dict[str, Any]) -> None:
            super()._before_create(client, manifest)
            both_forecast.wait()  # neither Job is created before both forecasts are made

    records: dict[str, dict[str, Any]] = {}

    def submit(name: str) -> None:
        task = _two_pods(Racing, env, name, "8s", wait_for_completion=False)
        ti = Ti()
        ti.task_id = name
        task.execute({"ti": ti})
        records[task.task_id] = ti.xcom["kueue_forecast"]

    threads = [threading.Thread(target=submit, args=(name,)) for name in ("align-a", "align-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert set(records) == {"align-a", "align-b"}, records
    first, second = sorted(records.values(), key=lambda r: r["start"])
    assert first["basis"].endswith(", admitted"), first
    for record in (first, second):
        assert record["at_submit"]["made_at"] <= record["made_at"], record
        waited = _seconds(record["at_submit"]["made_at"], record["at_submit"]["start"])
        assert waited < 5, ("neither saw the other before the create", record)
    # The one left waiting sees the other holding the quota: it starts once that one's run is over.
    assert _seconds(second["made_at"], second["start"]) > 8, second

    def ended() -> list[datetime]:
        conditions = [c for j in env.jobs() for c in j.status.conditions or [] if c.type == "Complete"]
        return [c.last_transition_time for c in conditions if c.status == "True"]

    ends = wait_for("both Jobs complete", lambda: (e := ended()) and len(e) == 2 and e, 180)
    later, _ = with_outcome(second, max(ends))
    print(
        "once queued", later["error_seconds"], "s off; before the create", later["at_submit"]["error_seconds"]
    )
    assert abs(later["error_seconds"]) < abs(later["at_submit"]["error_seconds"]), later


def _two_pods(
    kind: type[KueueIndexedJobOperator], env: KueueEnv, task_id: str, runs: str, **more: Any
) -> KueueIndexedJobOperator:
    """A task of two 1-CPU shards at once, each fake pod running ``runs``."""
    return kind(
        task_id=task_id,
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        parallelism=2,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": runs},
        **more,
    )


def _seconds(earlier: str, later: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


RELEASED_AFTER = 30.0
"""Each night, the quota is held by another team's Job the forecast cannot know the end of, this long."""


def test_a_night_that_waited_longer_than_the_model_said_teaches_the_next_nights_forecast(
    kueue_env_factory: Any, blob: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    """Night 1 forecasts from the stated duration while another Job holds the quota, and waits far longer
    than its model said; the history keeps that error beside the night's lengths. Night 2, held the same
    way, forecasts the wait the nights taught ("waits +N s as learned") and lands nearer its real end."""
    env: KueueEnv = kueue_env_factory(cpu="2", memory="16Gi")  # one Job of two 1-CPU pods at a time

    def night(number: int) -> dict[str, Any]:
        blocker = f"other-team-{number}"
        env.create_job(indexed_job(blocker, env.local_queue, completions=2, hold=True))
        wait_for("the other team's Job admitted", lambda: env.running_pods(blocker), 60)
        releaser = threading.Timer(RELEASED_AFTER, env.release_until_finished, args=(blocker,))
        releaser.start()
        task = _two_pods(
            KueueIndexedJobOperator,
            env,
            "shards",
            "3s",
            expected_shard_duration=3,
            checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
            deferrable=False,
        )
        ti = Ti()
        ti.dag_id, ti.run_id = "nightly", f"scheduled__{number}"
        try:
            result = task.execute({"ti": ti})
        finally:
            releaser.join()
        return dict(result["forecast"])

    first = night(1)
    out = capsys.readouterr().out
    assert first["model_wait_seconds"] > 2 and first["wait_bias_seconds"] == 0.0, first
    assert first["error_seconds"] > 10, ("the other team's Job held the quota far longer", first)
    assert "later than the forecast's model said" in out, out[-3000:]
    raw = blob.service.get_container_client(blob.container).download_blob(history_blob("nightly", "shards"))
    history = ShardHistory.from_json(json.loads(raw.readall()))
    assert history is not None and history.nights == ("scheduled__1",), history
    (taught,) = history.wait_errors
    assert taught == pytest.approx(first["error_seconds"], abs=0.2), (taught, first)

    second = night(2)
    out = capsys.readouterr().out
    assert f"waits {taught:+.0f} s as learned" in second["basis"], second
    assert second["wait_bias_seconds"] == pytest.approx(taught, abs=0.2), second
    print(
        "night 1 off by",
        first["error_seconds"],
        "s; night 2, with the wait learned:",
        second["error_seconds"],
    )
    assert abs(second["error_seconds"]) < abs(first["error_seconds"]), (first, second)
    after = ShardHistory.from_json(
        json.loads(
            blob.service.get_container_client(blob.container)
            .download_blob(history_blob("nightly", "shards"))
            .readall()
        )
    )
    assert (
        after is not None and after.nights == ("scheduled__1", "scheduled__2") and len(after.wait_errors) == 2
    )
