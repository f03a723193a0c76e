"""``on_deadline_risk={'spill_to': ...}`` on the real cluster and Azurite, through ``airflow dags test``: the
unfinished shards of a run that will miss its deadline move to an on-demand queue, and every shard runs to
completion exactly once (the ledger and both Jobs' statuses say so)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from airflow_kueue_provider.kueue.checkpoints.ledger import ledger_prefix
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import ESCALATIONS_ANNOTATION, QUEUE_NAME_LABEL, SHARDS_PER_POD_ENV

from ..airflow_runner import AirflowHome
from ..cluster import HOLD_ANNOTATION, KueueEnv, indexed_job, is_true, wait_for
from .conftest import CONN_ID, read_ledger
from .test_indexed_job_queueing import returned_result, write_operator_dag

ON_DEMAND = "on-demand"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
RUN_AFTER = "2026-11-30T04:00:00+00:00"


def _queues(factory: Any, spot_cpu: str, **spot: Any) -> tuple[KueueEnv, KueueEnv]:
    """A Spot ClusterQueue (``lq``) and an on-demand one (``on-demand``) in the same namespace."""
    spot_env = factory(cpu=spot_cpu, memory="16Gi", **spot)
    on_demand = factory(
        namespace=spot_env.namespace, local_queue=ON_DEMAND, spot=False, cpu="4", memory="16Gi"
    )
    return spot_env, on_demand


def _spill_extra(blob: SimpleNamespace, deadline_s: int, margin_s: int, more: str = "") -> str:
    """The operator's arguments: a deadline ``deadline_s`` from now (an ISO time: ``dags test`` with a fixed
    ``run_after`` starts the run at that time, in the past), spilling to the on-demand queue."""
    deadline = (datetime.now(UTC) + timedelta(seconds=deadline_s)).isoformat(timespec="seconds")
    return (
        f"checkpointing={{'conn_id': {CONN_ID!r}, 'container': {blob.container!r}}}, "
        f"deadline={deadline!r}, deadline_margin={margin_s}, "
        f"on_deadline_risk={{'spill_to': {ON_DEMAND!r}}}, {more}"
    )


def _job_in(env: KueueEnv, queue: str, skip: set[str]) -> dict[str, Any] | None:
    for job in env.jobs():
        if job.metadata.name not in skip and (job.metadata.labels or {}).get(QUEUE_NAME_LABEL) == queue:
            return env.job(job.metadata.name)
    return None


def _pod_env(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def _shards_env(job: dict[str, Any]) -> str:
    return str(_pod_env(job)["AIRFLOW_KUEUE_SHARDS"])


def _wave_state(env: KueueEnv, name: str) -> tuple[str | None, int]:
    """The Job's completed indexes and how many of its pods run (printed as is when a wait times out)."""
    status = (env.job(name) or {}).get("status", {})
    return status.get("completedIndexes"), len(env.running_pods(name))


def _release_first_wave(env: KueueEnv, name: str, wave: int) -> tuple[str | None, int]:
    """Release the held pods of indexes ``0..wave-1`` (again, with a new value, while one still runs: KWOK on
    a loaded machine has been seen to miss a release) and return ``_wave_state``. Later indexes stay held."""
    for pod in env.pods(name):
        annotations = pod["metadata"].get("annotations") or {}
        index = int(annotations.get(COMPLETION_INDEX_ANNOTATION, wave))
        if (
            index < wave
            and pod["status"].get("phase") == "Running"
            and not pod["metadata"].get("deletionTimestamp")
        ):
            env.cluster.core.patch_namespaced_pod(
                pod["metadata"]["name"],
                env.namespace,
                {"metadata": {"annotations": {HOLD_ANNOTATION: f"released-{time.monotonic_ns()}"}}},
            )
    return _wave_state(env, name)


def _assert_each_shard_ran_once(ledger: Any, shard_count: int) -> None:
    done = IndexSet()
    for attempt in ledger.attempts:
        assert not (done & attempt.completed), f"shards completed twice: {done & attempt.completed}"
        done |= attempt.completed
    assert done == IndexSet.range(0, shard_count)


def test_a_run_stuck_behind_a_saturated_spot_queue_spills_to_on_demand_and_runs_each_shard_once(
    kueue_env_factory: Any, airflow_home: AirflowHome, blob: SimpleNamespace
) -> None:
    spot, _ = _queues(kueue_env_factory, "2")
    blocker = spot.create_job(indexed_job("blocker", spot.local_queue, completions=1, cpu="2", hold=True))
    wait_for("the blocker admitted", lambda: is_true(spot.workload(blocker), "Admitted"))
    # The Spot queue never moves: no admission estimate, so the run is at risk once the deadline (120 s
    # from now) less the margin (100 s) has come with the Job still queued. Its 8 shards run 2 per pod (the
    # other spill test runs one per pod): the spill Job keeps the packing.
    write_operator_dag(
        airflow_home,
        "spill_saturated",
        spot,
        completions=8,
        parallelism=4,
        cpu="1",
        extra=_spill_extra(blob, 120, 100, "shards_per_pod=2,"),
    )
    run = airflow_home.test_dag("spill_saturated", run_after=RUN_AFTER, timeout=400)

    assert run.succeeded, run.output[-6000:]
    assert "AT RISK" in run.output and "escalating" in run.output, run.output[-6000:]
    result = returned_result(run)
    (step,) = result["escalations"]
    assert step["step"] == "spill_to" and step["detail"].startswith("moved 8 unfinished shard(s) (0-7)"), step
    assert result["completed_indexes"] == "0-7" and result["failed"] == 0 and result["completions"] == 8

    # The first Job is gone (it never held quota); the blocker is untouched; the spill Job ran all 8.
    names = sorted(j.metadata.name for j in spot.jobs())
    second = _job_in(spot, ON_DEMAND, {"blocker"})
    assert second is not None and names == sorted(["blocker", second["metadata"]["name"]]), names
    assert _shards_env(second) == "0-7" and second["status"]["completedIndexes"] == "0-3"
    assert second["spec"]["completions"] == 4 and _pod_env(second)[SHARDS_PER_POD_ENV] == "2", "4 pods of 2"
    assert not second["status"].get("failed") and is_true(second, "Complete")
    assert not is_true(spot.workload(blocker), "Finished")
    deadline = datetime.fromisoformat(result["deadline"])
    assert datetime.fromisoformat(second["status"]["completionTime"].replace("Z", "+00:00")) < deadline
    annotations = second["metadata"]["annotations"]
    assert [s["step"] for s in json.loads(annotations[ESCALATIONS_ANNOTATION])] == ["spill_to"]

    ledger = read_ledger(blob, ledger_prefix("spill_saturated", f"manual__{RUN_AFTER}", "shards"))
    assert [(str(a.shards), str(a.completed), a.status) for a in ledger.attempts] == [
        ("0-7", "", "spilled"),
        ("0-7", "0-7", "succeeded"),
    ]
    _assert_each_shard_ran_once(ledger, 8)


def test_a_running_spot_job_keeps_its_shards_and_spills_the_rest_once_it_is_preempted(
    kueue_env_factory: Any, airflow_home: AirflowHome, blob: SimpleNamespace
) -> None:
    spot, _ = _queues(kueue_env_factory, "4", preemption={"withinClusterQueue": "LowerPriority"})
    low, high = spot.priority_class("low", 10), spot.priority_class("high", 1000)
    # At risk 30 s from now (no estimate: the held pods never finish on their own), while
    # the Job runs on Spot: the spill waits, and running shards go on.
    write_operator_dag(
        airflow_home,
        "spill_preempted",
        spot,
        completions=12,
        parallelism=4,
        cpu="1",
        hold=True,
        extra=_spill_extra(blob, 300, 270, f"priority_class={low!r},"),
    )
    background = airflow_home.start_dag("spill_preempted", run_after=RUN_AFTER)
    try:
        first = wait_for("our Job", lambda: _job_in(spot, spot.local_queue, set()), timeout=240)
        name = first["metadata"]["name"]
        wait_for("our Job admitted", lambda: is_true(spot.workload(first), "Admitted"), timeout=60)
        waiting = wait_for(
            "the spill recorded as waiting",
            lambda: (
                (spot.job(name) or {}).get("metadata", {}).get("annotations", {}).get(ESCALATIONS_ANNOTATION)
            ),
            timeout=120,
        )
        (step,) = json.loads(waiting)
        assert step["step"] == "spill_to" and step["detail"].startswith("waiting: the Job holds quota"), step
        # The first wave finishes on Spot; the second starts and is preempted by a higher-priority Job.
        wait_for("4 pods running", lambda: len(spot.running_pods(name)) == 4, timeout=60)
        wait_for(
            "indexes 0-3 done and the next wave running",
            lambda: _release_first_wave(spot, name, 4) == ("0-3", 4),
            timeout=90,
            interval=3,
            explain=lambda: (_wave_state(spot, name), [p["status"].get("phase") for p in spot.pods(name)]),
        )
        spot.create_job(
            indexed_job(
                "preemptor",
                spot.local_queue,
                completions=1,
                cpu="4",
                labels={PRIORITY_LABEL: high},
                hold=True,
            )
        )
        second = wait_for("the spill Job", lambda: _job_in(spot, ON_DEMAND, set()), timeout=120)
        assert spot.job(name) is None, "the preempted first Job was deleted by the spill"
        spot.release_until_finished(second["metadata"]["name"])
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    (step,) = result["escalations"]
    assert step["detail"].startswith("moved 8 unfinished shard(s) (4-11)"), step
    assert result["completed_indexes"] == "0-11" and result["failed"] == 0

    second = spot.job(second["metadata"]["name"])
    assert second is not None and _shards_env(second) == "4-11"
    assert second["status"]["completedIndexes"] == "0-7" and not second["status"].get("failed")
    ledger = read_ledger(blob, ledger_prefix("spill_preempted", f"manual__{RUN_AFTER}", "shards"))
    assert [(str(a.shards), str(a.completed), a.status) for a in ledger.attempts] == [
        ("0-11", "0-3", "spilled"),
        ("4-11", "4-11", "succeeded"),
    ]
    _assert_each_shard_ran_once(ledger, 12)


def test_a_spill_to_the_task_s_own_rendered_queue_fails_before_anything_is_created(
    kueue_env: KueueEnv, blob: SimpleNamespace
) -> None:
    import pytest

    from airflow_kueue_provider.airflow_compat import AirflowFailException
    from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

    op = KueueIndexedJobOperator(
        task_id="shards",
        namespace=kueue_env.namespace,
        queue_name="{{ params.queue }}",
        image="example.invalid/shard:1",
        checkpointing={"conn_id": CONN_ID, "container": blob.container},
        deadline="07:00",
        on_deadline_risk={"spill_to": kueue_env.local_queue},
        deferrable=False,
    )
    op.queue_name = kueue_env.local_queue  # as Airflow renders the template
    ti = SimpleNamespace(dag_id="d", task_id="shards", run_id="r", try_number=1, map_index=-1)
    with pytest.raises(AirflowFailException, match="is the task's own queue_name"):
        op.execute({"ti": ti, "dag_run": SimpleNamespace(start_date=None)})  # type: ignore[arg-type]
    assert kueue_env.jobs() == []
