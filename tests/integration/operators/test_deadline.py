"""``deadline=`` and ``on_deadline_risk=`` on the real cluster, through ``airflow dags test`` (the task
defers, the trigger finds the run at risk, the task resumes to escalate and defers again)."""

from __future__ import annotations

import json
import re
from typing import Any

from airflow_kueue_provider.kueue.names import ESCALATIONS_ANNOTATION

from ..airflow_runner import AirflowHome
from ..cluster import indexed_job, is_true, wait_for
from .test_indexed_job_queueing import returned_result, write_operator_dag

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def _admitted_at(env: Any, job_name: str) -> str | None:
    workload = env.workload(env.job(job_name))
    for cond in (workload or {}).get("status", {}).get("conditions", []):
        if cond["type"] == "Admitted" and cond["status"] == "True":
            return str(cond["lastTransitionTime"])
    return None


def test_a_low_priority_run_near_its_deadline_is_raised_and_admitted_before_the_others(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="2", memory="16Gi")
    low, mid, urgent = (
        env.priority_class("low", 10),
        env.priority_class("mid", 100),
        env.priority_class("urgent", 1000),
    )
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=1, cpu="2", hold=True))
    wait_for("the blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    for name in ("other-1", "other-2"):  # ahead of ours: higher priority, and queued first
        env.create_job(
            indexed_job(
                name, env.local_queue, completions=1, cpu="2", labels={PRIORITY_LABEL: mid}, hold=True
            )
        )
    # The queue does not move, so there is no admission estimate: the run is at risk once the deadline
    # (45 s after the run started) less the margin (30 s) has come with the Job still queued.
    write_operator_dag(
        airflow_home,
        "deadline_priority",
        env,
        completions=2,
        cpu="1",
        hold=True,
        extra=(
            f"priority_class={low!r}, deadline=timedelta(seconds=45), deadline_margin=30, "
            f"on_deadline_risk={{'raise_priority': {urgent!r}}},"
        ),
    )
    background = airflow_home.start_dag("deadline_priority")
    try:
        others = {"blocker", "other-1", "other-2"}
        ours = wait_for("our Job", lambda: [j for j in env.jobs() if j.metadata.name not in others], 240)
        name = ours[0].metadata.name
        wait_for(
            "the escalation to the urgent class",
            lambda: (env.job(name) or {}).get("metadata", {}).get("labels", {}).get(PRIORITY_LABEL) == urgent,
            timeout=180,
        )
        workload = wait_for(
            "the Workload at the urgent priority",
            lambda: (w := env.workload(env.job(name))) and w["spec"].get("priority") == 1000 and w,
            timeout=60,
        )
        assert not is_true(workload, "Admitted")
        recorded = wait_for(  # the Job records the escalation for people and the UI
            "the escalation recorded on the Job",
            lambda: (
                (env.job(name) or {}).get("metadata", {}).get("annotations", {}).get(ESCALATIONS_ANNOTATION)
            ),
            timeout=60,
        )
        assert [s["step"] for s in json.loads(recorded)] == ["raise_priority"]
        env.release("blocker")  # quota for one Job of 2 CPUs: ours (1000) goes before the others (100)
        wait_for("ours admitted", lambda: _admitted_at(env, name), timeout=120)
        assert _admitted_at(env, "other-1") is None and _admitted_at(env, "other-2") is None
        env.release_until_finished(name)
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    assert "AT RISK" in run.output and "escalating" in run.output, run.output[-6000:]
    result = returned_result(run)
    (step,) = result["escalations"]
    assert step["step"] == "raise_priority" and step["detail"] == urgent, result["escalations"]
    assert result["eta_history"] and result["eta_history"][-1]["at_risk"] is True
    assert result["completed_indexes"] == "0,1"


def test_a_run_with_ample_time_never_escalates(kueue_env: Any, airflow_home: AirflowHome) -> None:
    write_operator_dag(
        airflow_home,
        "deadline_ample",
        kueue_env,
        completions=4,
        parallelism=2,
        cpu="250m",
        extra="deadline=timedelta(hours=6), on_deadline_risk={'notify': print},",
    )
    run = airflow_home.test_dag("deadline_ample", timeout=300)
    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["escalations"] == [], result
    assert result["eta_history"] and not any(s["at_risk"] for s in result["eta_history"])
    assert "on track" in run.output and "escalating" not in run.output
    outcome = result["deadline_outcome"]  # finished hours before the deadline: met, and by how much
    assert outcome["met"] is True and outcome["seconds"] > 5 * 3600, outcome
    assert outcome["finished_at"] == result["eta_history"][-1]["at"], result["eta_history"][-1]
    assert " to spare" in run.output and "MISSED" not in run.output


def test_a_run_that_ends_after_its_deadline_says_missed_by_how_much(
    kueue_env: Any, airflow_home: AirflowHome
) -> None:
    """Two shards of 15 s against a deadline 5 s after the run started: the result, and the log's line."""
    write_operator_dag(
        airflow_home,
        "deadline_missed",
        kueue_env,
        completions=2,
        cpu="250m",
        run_duration="15s",
        extra="deadline=timedelta(seconds=5),",
    )
    run = airflow_home.test_dag("deadline_missed", timeout=300)
    assert run.succeeded, run.output[-6000:]
    outcome = returned_result(run)["deadline_outcome"]
    assert outcome["met"] is False and outcome["seconds"] >= 10, outcome
    hh_mm, ss = outcome["deadline"][11:16], outcome["deadline"][16:19]  # ":SS" shown unless ":00"
    missed = rf"deadline {hh_mm}(?:{ss})? UTC MISSED by \d+ (?:s|min)"
    assert re.search(missed, run.output), run.output[-3000:]


def test_an_escalation_to_a_priority_class_that_does_not_exist_fails_before_anything_is_created(
    kueue_env: Any,
) -> None:
    from types import SimpleNamespace

    import pytest

    from airflow_kueue_provider.airflow_compat import AirflowFailException
    from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

    op = KueueIndexedJobOperator(
        task_id="shards",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        image="example.invalid/shard:1",
        deadline="07:00 Europe/London",
        on_deadline_risk={"raise_priority": "no-such-class"},
        deferrable=False,
    )
    ti = SimpleNamespace(dag_id="d", task_id="shards", run_id="r", try_number=1, map_index=-1)
    with pytest.raises(AirflowFailException, match=r"no-such-class'?: no such WorkloadPriorityClass"):
        op.execute({"ti": ti, "dag_run": SimpleNamespace(start_date=None)})  # type: ignore[arg-type]
    assert kueue_env.jobs() == []


NOTIFY_ONCE_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator


def tell_the_owner(context, info):
    print(f"DEADLINE-NOTIFIED try={{context['ti'].try_number}} job={{info['job_name']}}")


with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions=3, parallelism=3, backoff_limit_per_index=0,
        retries=1, retry_delay=timedelta(seconds=1),
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        annotations={{
            "kwok.airflow-kueue.io/run-duration": "{{{{ '15s' if ti.try_number == 1 else '1s' }}}}",
            "kwok.airflow-kueue.io/fail-indexes": "{{{{ '0' if ti.try_number == 1 else '' }}}}",
        }},
        deadline=timedelta(seconds=20), deadline_margin=60,
        on_deadline_risk={{"notify": tell_the_owner}},
    )
"""


def test_a_deadline_inside_its_margin_is_warned_and_notified_once_per_task_instance_across_a_retry(
    kueue_env: Any, airflow_home: AirflowHome
) -> None:
    """The margin (60 s) covers the whole deadline (20 s after the run starts): a warning when the DAG is
    parsed and when the Job is submitted; the notifier fires in try 1, whose Job then fails (index 0); try
    2 runs to success without notifying again, and its result lists try 1's step."""
    airflow_home.write_dag(
        "deadline_once",
        NOTIFY_ONCE_DAG.format(
            dag_id="deadline_once", namespace=kueue_env.namespace, queue=kueue_env.local_queue
        ),
    )
    run = airflow_home.test_dag("deadline_once", timeout=400)
    assert run.succeeded, run.output[-8000:]
    assert "is not shorter than deadline 0:00:20 from the run's start" in run.output  # parse time
    assert "the run is AT RISK from its first line; on_deadline_risk is taken at once" in run.output
    notified = [
        line for line in run.output.splitlines() if "DEADLINE-NOTIFIED" in line and "print" not in line
    ]
    assert len({line[line.index("DEADLINE-NOTIFIED") :] for line in notified}) == 1, notified
    assert "DEADLINE-NOTIFIED try=1" in notified[0]
    assert (
        "on_deadline_risk was taken by an earlier try of this task instance (notify): not again" in run.output
    )
    result = returned_result(run)
    assert [(s["step"], s["detail"]) for s in result["escalations"]] == [("notify", "sent")], result
    assert result["succeeded"] == 3 and len(result["attempt_figures"]) == 2, result
