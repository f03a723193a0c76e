"""Upgrade while deferred: a task deferred by main at 61dd795 resumes on the current code.

When a task defers, Airflow keeps its trigger's ``serialize()`` -- classpath and kwargs -- in its database.
After the provider is upgraded, the triggerer imports that classpath and calls it with those kwargs: the new
code gets the old kwargs. ``previous_main/`` holds what 61dd795 serialized (its README says how; the files
are never regenerated). Each test creates the real object on the bed, puts the object's name, uid, queue
and times into the stored kwargs (every other key keeps its stored value and shape), re-creates the trigger
as the triggerer does (the kwargs through Airflow's own trigger-row encoding, then the classpath imported
and called), takes the first event of its ``run()`` while the held pods are released, and hands that event
to the operator's ``execute_complete``, as the worker that resumes the task does.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.spec.parallelism_ramp import ParallelismRamp
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..cluster import KueueEnv, indexed_job, short_id, wait_for
from ..operators.conftest import CONN_ID, read_ledger

PREVIOUS_MAIN = Path(__file__).parent / "previous_main"
# The task instance the stored ledger prefix was made for (previous_main/README.md).
IDENTITY = AirflowIdentity("upgrade_while_deferred", "shards", "manual__2026-12-01T02:00:00+00:00", 1)
# What 61dd795's operators put on the Jobs and JobSets (and their pod templates) of that task instance: the
# triggerer's shared watch lists only objects with the managed-by label, and an object created before the
# upgrade has these and no other.
OLD_LABELS = {
    "airflow-kueue.io/dag-id": "upgrade_while_deferred",
    "airflow-kueue.io/task-id": "shards",
    "airflow-kueue.io/run-id": "manual__2026-12-01T02_00_00_00_00-c2fdfb0d44",
    "airflow-kueue.io/try-number": "1",
    "app.kubernetes.io/managed-by": "airflow-kueue-provider",
}
OLD_ANNOTATIONS = {
    "airflow-kueue.io/dag-id": "upgrade_while_deferred",
    "airflow-kueue.io/task-id": "shards",
    "airflow-kueue.io/run-id": "manual__2026-12-01T02:00:00+00:00",
    "airflow-kueue.io/try-number": "1",
    "airflow-kueue.io/map-index": "-1",
}
JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"  # Kueue admits each parallelism raise as a Workload slice
JOB_KEYS = {
    "job_name",
    "namespace",
    "queue_name",
    "kubernetes_conn_id",
    "max_failed_indexes",
    "queue_timeout",
    "submitted_at",
    "ledger",
    "ramp",
    "job_uid",
    "workload_timeout",
    "start_timeout",
    "deferred_at",
    "released_before",
    "deadline",
}
JOBSET_KEYS = {
    "jobset_name",
    "namespace",
    "queue_name",
    "kubernetes_conn_id",
    "jobset_uid",
    "queue_timeout",
    "submitted_at",
    "workload_timeout",
    "start_timeout",
    "deferred_at",
}


def _stored(name: str) -> tuple[str, dict[str, Any]]:
    classpath, kwargs = json.loads((PREVIOUS_MAIN / name).read_text())
    return classpath, kwargs


def _as_the_triggerer_does(classpath: str, kwargs: dict[str, Any]) -> Any:
    """The trigger row Airflow writes at the deferral (its own encoding of the kwargs), read back and
    decoded as the triggerer does, and the class imported from the stored classpath, called with them."""
    from airflow.models.trigger import Trigger
    from airflow.serialization.decoders import smart_decode_trigger_kwargs

    row = Trigger(classpath, kwargs)
    decoded = {k: smart_decode_trigger_kwargs(v) for k, v in row.kwargs.items()}  # type: ignore[no-untyped-call]
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**decoded)


async def _first_event(trigger: Any) -> dict[str, Any]:
    """What the triggerer takes from the trigger: the first event of ``run()``."""
    events = trigger.run()
    try:
        event = await events.__anext__()
    finally:
        await events.aclose()
    return dict(event.payload)


def _created_epoch(obj: dict[str, Any]) -> float:
    return datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00")).timestamp()


def _context() -> dict[str, Any]:
    ti = SimpleNamespace(
        dag_id=IDENTITY.dag_id,
        task_id=IDENTITY.task_id,
        run_id=IDENTITY.run_id,
        try_number=IDENTITY.try_number,
        map_index=IDENTITY.map_index,
    )
    return {"ti": ti}


def _ledger_session(blob: SimpleNamespace, stored_ledger: dict[str, Any]) -> CheckpointSession:
    """The session the resumed operator builds, with the ledger the deferring operator wrote: its attempt
    recorded before the deferral (as ``execute`` does)."""
    config = Checkpointing(conn_id=CONN_ID, container=blob.container)
    session = CheckpointSession(config, IDENTITY, int(stored_ledger["shard_count"]))
    assert session.prefix == stored_ledger["prefix"], (
        "the operator now looks for the ledger elsewhere than a deferred trigger writes it"
    )
    session.check()
    session.prepare_pod_access()
    return session


def _old_job(
    name: str, queue: str, parallelism: int, completions: int = 3, hold: bool = True
) -> dict[str, Any]:
    """An Indexed Job as 61dd795's operator labelled it, its pods held Running until released."""
    job = indexed_job(
        name,
        queue,
        completions=completions,
        parallelism=parallelism,
        hold=hold,
        labels=OLD_LABELS,
        backoffLimitPerIndex=1,
    )
    job["metadata"]["annotations"] = dict(OLD_ANNOTATIONS)
    job["spec"]["template"]["metadata"]["labels"] = dict(OLD_LABELS)
    return job


@pytest.mark.parametrize("fixture", ["job_plain.json", "job_ramp_deadline_ledger.json"])
def test_a_job_deferred_by_previous_main_resumes_on_the_current_code(
    fixture: str, kueue_env: KueueEnv, request: pytest.FixtureRequest
) -> None:
    classpath, stored = _stored(fixture)
    assert set(stored) == JOB_KEYS, "the fixture is 61dd795's form: never rewrite it"
    ramp, deadline, ledger = stored["ramp"], stored["deadline"], stored["ledger"]
    name = f"upgrade-{short_id()}"
    manifest = _old_job(name, kueue_env.local_queue, parallelism=int(ramp["start"]) if ramp else 3)
    if ramp:
        manifest["metadata"]["annotations"][ELASTIC_JOB] = "true"
    job = kueue_env.create_job(manifest)
    kwargs = {
        **stored,
        "job_name": name,
        "namespace": kueue_env.namespace,
        "queue_name": kueue_env.local_queue,
        "job_uid": job["metadata"]["uid"],
        "submitted_at": _created_epoch(job),
        "deferred_at": time.time() - 60,  # deferred before the upgrade: the resume guard is open
    }
    blob: Any = None
    if ledger:
        blob = request.getfixturevalue("blob")
        kwargs["ledger"] = {**ledger, "container": blob.container}  # this run's container, same shape
        session = _ledger_session(blob, ledger)
        session.record_attempt(name, ShardPacks(IndexSet.range(0, 3)))

    def ramped() -> bool:
        return bool((kueue_env.job(name) or {}).get("spec", {}).get("parallelism") == 3)

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_as_the_triggerer_does(classpath, kwargs)))
        if ramp:
            await asyncio.to_thread(wait_for, "the stored ramp raising parallelism 1 -> 3", ramped, 90)
        await asyncio.to_thread(
            wait_for, "3 pods held running", lambda: len(kueue_env.running_pods(name)) == 3, 120
        )
        assert not follow.done(), f"the trigger ended while every pod was held: {follow.result()}"
        await asyncio.to_thread(kueue_env.release_until_finished, name)
        return await asyncio.wait_for(follow, timeout=120)

    event = asyncio.run(scenario())

    assert event["status"] == "success", event
    assert (event["job_name"], event["namespace"], event["job_uid"]) == (
        name,
        kueue_env.namespace,
        job["metadata"]["uid"],
    )
    assert (event["completed_indexes"], event["failed_indexes"], event["succeeded"]) == ("0-2", "", 3), event
    assert event["cluster_queue"] == kueue_env.cluster_queue, event
    if deadline:
        assert event["deadline"] == deadline["deadline"], event
        assert event["escalations"] == deadline["escalations"], event
        assert event["eta_history"][: len(deadline["eta_history"])] == deadline["eta_history"], event
    if stored["released_before"]:
        assert event["quota_released_pod_seconds"] >= stored["released_before"]["pod_seconds"], event
        assert event["quota_released_cpu_seconds"] >= stored["released_before"]["cpu_seconds"], event
    if blob is not None:  # the trigger kept the ledger current through the stored ledger kwarg
        attempt = read_ledger(blob, ledger["prefix"]).attempt(name)
        assert attempt is not None and str(attempt.completed) == "0-2", attempt

    options: dict[str, Any] = {}
    if blob is not None:  # the operator that deferred it (previous_main/README.md)
        options = {
            "parallelism": 3,
            "max_failed_indexes": 1,
            "queue_timeout": 3600,
            "workload_timeout": 90,
            "start_timeout": 300,
            "parallelism_ramp": ParallelismRamp(start=1, step=2, every_seconds=1.0),
            "checkpointing": {"conn_id": CONN_ID, "container": blob.container},
            "deadline": deadline["deadline"],
            "deadline_margin": 600,
            "on_deadline_risk": {"raise_priority": "urgent"},
        }
    op = KueueIndexedJobOperator(
        task_id=IDENTITY.task_id,
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        image="example.invalid/shard:1",
        completions=3,
        **options,
    )
    result = op.execute_complete(_context(), event)  # type: ignore[arg-type]

    assert (result["job_name"], result["completed_indexes"], result["succeeded"]) == (name, "0-2", 3), result
    assert "status" not in result and "message" not in result, result
    if deadline:
        assert result["deadline"] == deadline["deadline"], result
        assert result["escalations"] == deadline["escalations"], result
    if blob is not None:
        assert result["attempts"] == 1 and result["ledger"].startswith(f"{blob.container}/"), result
        attempt = read_ledger(blob, ledger["prefix"]).attempt(name)
        assert attempt is not None and attempt.status == "succeeded", attempt


def _jobset(name: str, queue: str) -> dict[str, Any]:
    """A coordinator (held until released) and two 1 s workers, as one Kueue-queued JobSet."""

    def replicated(rj_name: str, completions: int, hold: bool) -> dict[str, Any]:
        job = _old_job(rj_name, queue, parallelism=completions, completions=completions, hold=hold)
        meta = {"labels": dict(OLD_LABELS), "annotations": dict(OLD_ANNOTATIONS)}
        return {"name": rj_name, "replicas": 1, "template": {"metadata": meta, "spec": job["spec"]}}

    return {
        "apiVersion": f"{JOBSET_API[0]}/{JOBSET_API[1]}",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "labels": {**OLD_LABELS, "kueue.x-k8s.io/queue-name": queue},
            "annotations": dict(OLD_ANNOTATIONS),
        },
        "spec": {
            "suspend": True,
            "replicatedJobs": [replicated("coordinator", 1, True), replicated("workers", 2, False)],
            "successPolicy": {"operator": "All"},
            "failurePolicy": {"maxRestarts": 0},
        },
    }


def test_a_jobset_deferred_by_previous_main_resumes_on_the_current_code(kueue_env: KueueEnv) -> None:
    classpath, stored = _stored("jobset.json")
    assert set(stored) == JOBSET_KEYS, "the fixture is 61dd795's form: never rewrite it"
    name = f"upgrade-{short_id()}"
    created = kueue_env.cluster.custom.create_namespaced_custom_object(
        JOBSET_API[0], JOBSET_API[1], kueue_env.namespace, JOBSET_API[2], _jobset(name, kueue_env.local_queue)
    )
    kwargs = {
        **stored,
        "jobset_name": name,
        "namespace": kueue_env.namespace,
        "queue_name": kueue_env.local_queue,
        "jobset_uid": created["metadata"]["uid"],
        "submitted_at": _created_epoch(created),
        "deferred_at": time.time() - 60,
    }
    coordinator = f"{name}-coordinator-0"

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_as_the_triggerer_does(classpath, kwargs)))
        await asyncio.to_thread(
            wait_for, "the coordinator held running", lambda: kueue_env.running_pods(coordinator), 120
        )
        assert not follow.done(), f"the trigger ended while the coordinator was held: {follow.result()}"
        await asyncio.to_thread(kueue_env.release_until_finished, coordinator)
        return await asyncio.wait_for(follow, timeout=120)

    event = asyncio.run(scenario())

    assert event["status"] == "success", event
    assert (event["jobset_name"], event["jobset_uid"]) == (name, created["metadata"]["uid"]), event
    assert event["cluster_queue"] == kueue_env.cluster_queue, event
    progress = [
        (rj["name"], rj["completions"], rj["succeeded"], rj["failed_indexes"])
        for rj in event["replicated_jobs"]
    ]
    assert progress == [("coordinator", 1, 1, ""), ("workers", 2, 2, "")], event
    assert (event["completions"], event["succeeded"], event["failed"]) == (3, 3, 0), event

    op = KueueJobSetOperator(
        task_id=IDENTITY.task_id,
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        queue_timeout=3600,
        workload_timeout=90,
        start_timeout=300,
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="example.invalid/c:1"),
            KueueReplicatedJob("workers", image="example.invalid/w:1", completions=2),
        ],
    )
    result = op.execute_complete(_context(), event)  # type: ignore[arg-type]

    assert result["jobset_name"] == name and "status" not in result, result
    assert [(rj["name"], rj["succeeded"]) for rj in result["replicated_jobs"]] == [
        ("coordinator", 1),
        ("workers", 2),
    ], result
