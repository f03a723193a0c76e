"""The trigger on the real cluster: started twice, restarted from its serialized form, killed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from typing import Any

from airflow_kueue_provider.hooks.kind_client import KindClient
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch

from ..cluster import HOLD, KueueEnv, condition, indexed_job, is_true, wait_for


def _submit(env: KueueEnv, run_duration: str, completions: int = 3, hold: bool = False) -> dict[str, Any]:
    op = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=completions,
        annotations={"kwok.airflow-kueue.io/run-duration": run_duration, **(HOLD if hold else {})},
    )
    manifest = op.build_manifest(AirflowIdentity("trigger_tests", "shards", f"run-{env.namespace}"))
    return KindClient(JOB, "kubernetes_default").create(manifest)


def _trigger(env: KueueEnv, job: dict[str, Any]) -> KueueJobTrigger:
    return KueueJobTrigger(
        job_name=job["metadata"]["name"], namespace=env.namespace, queue_name=env.local_queue
    )


async def _first_event(trigger: KueueJobTrigger) -> dict[str, Any]:
    return await trigger.first_event()  # run() adds only the resume guard (tests/unit/triggers)


def _recreate(trigger: KueueJobTrigger) -> KueueJobTrigger:
    """What a triggerer does after a restart: import the classpath and call it with the serialized kwargs."""
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)  # type: ignore[no-any-return]


def test_started_twice_and_restarted_mid_run_gives_the_same_final_event(kueue_env: KueueEnv) -> None:
    job = _submit(kueue_env, run_duration="1s", hold=True)
    name = job["metadata"]["name"]

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        original = _trigger(kueue_env, job)
        twin = asyncio.create_task(_first_event(_trigger(kueue_env, job)))  # the same trigger started twice
        first = asyncio.create_task(_first_event(original))
        await asyncio.to_thread(wait_for, "pods running", lambda: len(kueue_env.running_pods(name)) == 3)
        first.cancel()  # the triggerer stops mid-run
        with contextlib.suppress(asyncio.CancelledError):
            await first
        restarted = asyncio.create_task(_first_event(_recreate(original)))
        await asyncio.to_thread(kueue_env.release_until_finished, name)
        # Both see the finished Job through the shared watch within seconds (bounded: a miss fails here).
        done, _ = await asyncio.wait([restarted, twin], timeout=150)
        if len(done) < 2:
            raise AssertionError(f"the triggers missed the finished Job: {_hub_state(name)}")
        return restarted.result(), twin.result()

    restarted, twin = asyncio.run(scenario())

    assert restarted["status"] == twin["status"] == "success"
    for key in (
        "job_name",
        "completed_indexes",
        "failed_indexes",
        "succeeded",
        "cluster_queue",
        "workload_name",
    ):
        assert restarted[key] == twin[key], key
    assert restarted["completed_indexes"] == "0-2"
    assert [
        j.metadata.name for j in kueue_env.cluster.batch.list_namespaced_job(kueue_env.namespace).items
    ] == [job["metadata"]["name"]]
    assert NamespaceWatch._hubs == {}, "the shared watch is closed when its last follower leaves"


def _hub_state(job_name: str) -> str:
    """What the shared watch knew when a trigger missed a change: to tell a lost event from a dead loop."""
    states = []
    for key, hub in NamespaceWatch._hubs.items():
        job = hub.slot("jobs").get(job_name) or {}
        conditions = [c.get("type") for c in job.get("status", {}).get("conditions", [])]
        states.append(
            f"{key}: synced={hub.synced.is_set()} lists={hub.lists} failures={hub.failures} "
            f"events={hub.events} task_done={hub._task.done() if hub._task else None} "
            f"job rv={job.get('metadata', {}).get('resourceVersion')} conditions={conditions} "
            f"followers={sorted(hub.followers)}"
        )
    return "; ".join(states) or "no hub"


def test_one_shared_watch_serves_many_triggers_of_a_namespace(kueue_env: KueueEnv) -> None:
    jobs = [_submit_named(kueue_env, i) for i in range(5)]

    async def scenario() -> list[dict[str, Any]]:
        tasks = [asyncio.create_task(_first_event(_trigger(kueue_env, j))) for j in jobs]
        await asyncio.sleep(0.5)
        assert len(NamespaceWatch._hubs) == 1
        return await asyncio.gather(*tasks)

    events = asyncio.run(scenario())
    assert [e["status"] for e in events] == ["success"] * 5
    assert sorted(e["job_name"] for e in events) == sorted(j["metadata"]["name"] for j in jobs)


def _submit_named(env: KueueEnv, i: int) -> dict[str, Any]:
    op = KueueIndexedJobOperator(
        task_id=f"shard-{i}",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/s:1",
        completions=1,
        annotations={"kwok.airflow-kueue.io/run-duration": "2s"},
    )
    return KindClient(JOB, "kubernetes_default").create(
        op.build_manifest(AirflowIdentity("many", f"shard-{i}", "run-1"))
    )


def test_on_kill_while_deferred_deletes_the_job(kueue_env: KueueEnv) -> None:
    job = _submit(kueue_env, run_duration="10m")
    wait_for(
        "Job running", lambda: (j := kueue_env.job(job["metadata"]["name"])) and j["status"].get("active")
    )

    asyncio.run(_trigger(kueue_env, job).on_kill())

    wait_for("Job gone", lambda: kueue_env.job(job["metadata"]["name"]) is None, timeout=60)


def test_on_kill_keeps_a_job_that_already_finished(kueue_env: KueueEnv) -> None:
    """A triggerer also calls on_kill for a trigger whose task ended elsewhere (``airflow dags test`` leaves
    its trigger in the database): the finished Job is the run's record, and its TTL removes it."""
    job = _submit(kueue_env, run_duration="1s")
    name = job["metadata"]["name"]
    wait_for("Job Complete", lambda: is_true(kueue_env.job(name), "Complete"), timeout=90)

    asyncio.run(_trigger(kueue_env, job).on_kill())

    assert kueue_env.job(name) is not None


def test_a_recreated_trigger_does_not_time_out_a_job_that_was_admitted_then_preempted(
    kueue_env_factory: Any,
) -> None:
    """After a triggerer restart the trigger is new: it must read 'admitted before' from the Workload (its
    eviction), not from memory, or queue_timeout would delete a requeued Job that already ran."""
    env = kueue_env_factory(cpu="4", memory="16Gi", preemption={"withinClusterQueue": "LowerPriority"})
    low, high = env.priority_class("low", 100), env.priority_class("high", 1000)
    op = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=2,
        priority_class=low,
        resources={"requests": {"cpu": "2", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "1s", **HOLD},
    )
    job = KindClient(JOB, "kubernetes_default").create(
        op.build_manifest(AirflowIdentity("requeue", "shards", env.namespace))
    )
    name = job["metadata"]["name"]
    wait_for("our pods running", lambda: len(env.running_pods(name)) == 2, timeout=180)
    env.create_job(
        indexed_job(
            "urgent",
            env.local_queue,
            completions=2,
            cpu="2",
            hold=True,
            labels={"kueue.x-k8s.io/priority-class": high},
        )
    )
    wait_for("ours evicted and requeued", lambda: (w := env.workload(job)) and condition(w, "Requeued"), 60)

    async def scenario() -> dict[str, Any]:
        recreated = _recreate(
            KueueJobTrigger(
                job_name=name,
                namespace=env.namespace,
                queue_name=env.local_queue,
                queue_timeout=5,  # long past: the Job was created well over 5 s ago
                job_uid=job["metadata"]["uid"],
                submitted_at=time.time() - 60,
            )
        )
        follow = asyncio.create_task(_first_event(recreated))
        await asyncio.sleep(3)  # it has seen the requeued Job, past its queue_timeout
        assert not follow.done(), "the trigger did not end the task"
        await asyncio.to_thread(env.release_until_finished, "urgent")
        await asyncio.to_thread(env.release_until_finished, name)
        return await follow

    event = asyncio.run(scenario())

    assert event["status"] == "success" and event["evictions"] >= 1, event
    assert env.job(name) is not None, "the Job was not deleted"
