"""The submit forecast on the real cluster: a Job whose deadline the forecast already says is out of reach
is handed back at the trigger's first check after the submit, not once the deadline less the margin has
come."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_kueue_provider.hooks.kind_client import KindClient
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.kueue.progress.deadline import DeadlinePlan
from airflow_kueue_provider.kueue.progress.eta import Estimate
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

from ..cluster import KueueEnv


def _submit(env: KueueEnv) -> dict[str, Any]:
    op = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=3,
        annotations={"kwok.airflow-kueue.io/run-duration": "10m"},  # no index finishes: no ETA of its own
    )
    manifest = op.build_manifest(AirflowIdentity("deadline_forecast", "shards", f"run-{env.namespace}"))
    return KindClient(JOB, "kubernetes_default").create(manifest)


def _trigger(env: KueueEnv, job: dict[str, Any], forecast: Estimate | None) -> KueueJobTrigger:
    now = datetime.now(UTC)
    plan = DeadlinePlan(now + timedelta(hours=2), timedelta(minutes=10), escalate=True, forecast=forecast)
    return KueueJobTrigger(
        job_name=job["metadata"]["name"],
        namespace=env.namespace,
        queue_name=env.local_queue,
        deadline=plan.to_dict(),
    )


def test_an_unreachable_forecast_hands_the_task_back_at_the_first_watch_event(kueue_env: KueueEnv) -> None:
    job = _submit(kueue_env)
    late = Estimate(datetime.now(UTC) + timedelta(hours=3), timedelta(minutes=5))  # 1 h past the deadline

    async def scenario() -> tuple[dict[str, Any], float, bool]:
        started = time.monotonic()
        event = await asyncio.wait_for(_trigger(kueue_env, job, late).first_event(), timeout=60)
        took = time.monotonic() - started
        # The same Job and deadline without the forecast: nothing says it is late, so no hand-back.
        without = asyncio.create_task(_trigger(kueue_env, job, None).first_event())
        done, _ = await asyncio.wait([without], timeout=8)
        without.cancel()
        return event, took, bool(done)

    event, took, handed_back_without = asyncio.run(scenario())
    assert event["status"] == "deadline_risk", event
    assert "AT RISK (submit forecast" in event["message"], event["message"]
    # One check: the first snapshot of the Job on the watch is the one that hands the task back.
    assert len(event["eta_history"]) == 1 and event["eta_history"][0]["at_risk"] is True, event["eta_history"]
    assert took < 30, f"handed back after {took:.1f} s"
    assert not handed_back_without
