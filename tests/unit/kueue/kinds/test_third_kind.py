"""A third job kind, made of its own files only (``fake_ray_kind``: a RayJob-like object that ends by a
status field), registers itself and runs through the operator template and the trigger loop: submit,
defer, the shared watch, admission, the end, the result -- and the loop's other exits. No shared module
names it; only its transport is fake (``fake_cluster``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.kueue import kinds
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal
from airflow_kueue_provider.kueue.kinds.registry import unregister
from airflow_kueue_provider.kueue.names import SEAL_ANNOTATION
from airflow_kueue_provider.kueue.progress.trigger_event import KueueEvent
from airflow_kueue_provider.operators import operator_kind
from airflow_kueue_provider.operators.kueue_operator import KueueOperator
from airflow_kueue_provider.triggers import kueue_follow
from airflow_kueue_provider.watch import following, namespace_watch
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch
from tests.unit.kueue.kinds.fake_cluster import FakeAsyncHook, FakeCluster, fake_client_class
from tests.unit.kueue.kinds.fake_ray_kind import (
    RAY,
    FakeRayFailed,
    FakeRayOperator,
    FakeRayTrigger,
    register_fake_kind,
)

try:
    from airflow.sdk.exceptions import TaskDeferred
except ImportError:  # Airflow 3.1
    from airflow.exceptions import TaskDeferred  # type: ignore[no-redef]

CONTEXT: Any = {"ti": SimpleNamespace(dag_id="d", task_id="ray", run_id="r", try_number=1, map_index=-1)}
CONTEXT_IDENTITY = AirflowIdentity("d", "ray", "r", 1)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    register_fake_kind()
    cluster = FakeCluster()
    monkeypatch.setattr(operator_kind, "KindClient", fake_client_class(cluster))
    FakeAsyncHook.cluster = cluster
    for module in (namespace_watch, following, kueue_follow):
        monkeypatch.setattr(module, "AsyncKueueHook", FakeAsyncHook)
    yield cluster
    unregister(RAY.kind)
    assert NamespaceWatch._hubs == {}, "every follower left the shared watch"


def _submitted(**kwargs: Any) -> tuple[FakeRayOperator, FakeRayTrigger]:
    op = FakeRayOperator(task_id="ray", namespace="ns", queue_name="q", entrypoint="python job.py", **kwargs)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(CONTEXT)
    trigger = deferred.value.trigger
    assert isinstance(trigger, FakeRayTrigger)
    classpath, serialized = trigger.serialize()
    assert classpath.endswith("FakeRayTrigger") and serialized["rayjob_name"] == "ray-ray-1"
    return op, FakeRayTrigger(**serialized)  # as a triggerer loads it


async def _until(what: str, ready: Any) -> None:
    for _ in range(500):
        if ready():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _followed(cluster: FakeCluster, trigger: FakeRayTrigger, then: Any) -> dict[str, Any]:
    """Run the trigger on the real shared watch; once the watch follows the kind, do ``then``."""

    async def scenario() -> dict[str, Any]:
        task = asyncio.create_task(trigger.first_event())
        await _until("the watch of the new kind", lambda: cluster.streams.get(RAY.api.plural))
        hub = next(iter(NamespaceWatch._hubs.values()))
        await _until("the hub in sync", hub.synced.is_set)
        then()
        return await asyncio.wait_for(task, 10)

    return asyncio.run(scenario())


def test_a_new_kind_is_submitted_sealed_followed_and_returns_its_result(cluster: FakeCluster) -> None:
    op, trigger = _submitted()
    (obj,) = cluster.objects[RAY.api.plural].values()
    assert obj["metadata"]["annotations"][SEAL_ANNOTATION], "sealed by the shared submit"
    assert obj["spec"]["suspend"] is True

    def run() -> None:
        cluster.admit(RAY, "ray-ray-1")
        cluster.finish(RAY, "ray-ray-1", "SUCCEEDED")

    event = _followed(cluster, trigger, run)
    assert event["status"] == "success" and event["rayjob_name"] == "ray-ray-1"
    assert KueueEvent.from_dict(event).kind == RAY.kind, "the event's name key says its kind"
    result = op.execute_complete(CONTEXT, event)
    assert result["rayjob_name"] == "ray-ray-1" and result["rayjob_uid"] == obj["metadata"]["uid"]
    assert result["ray_status"] == "SUCCEEDED" and result["namespace"] == "ns"


def test_a_failed_run_raises_the_kinds_failure_and_a_finished_object_is_kept(cluster: FakeCluster) -> None:
    op, trigger = _submitted()
    event = _followed(cluster, trigger, lambda: cluster.finish(RAY, "ray-ray-1", "FAILED"))
    assert event["status"] == "failed"
    with pytest.raises(FakeRayFailed, match="failed: ray-ray-1: FAILED") as failed:
        op.execute_complete(CONTEXT, event)
    assert failed.value.status == "failed" and failed.value.namespace == "ns"
    assert cluster.deleted == [], "a finished object is the run's record: kept"


def test_the_queue_timeout_deletes_the_waiting_object(cluster: FakeCluster) -> None:
    _, trigger = _submitted(queue_timeout=3)  # creationTimestamp has whole seconds
    event = _followed(cluster, trigger, lambda: None)  # never admitted
    assert event["status"] == "timeout" and "more than queue_timeout" in event["message"]
    assert cluster.deleted == ["ray-ray-1"], "deleted through the kind's description"


def test_an_object_deleted_while_followed_ends_the_task_with_the_reason(cluster: FakeCluster) -> None:
    _, trigger = _submitted()
    event = _followed(cluster, trigger, lambda: cluster.remove(RAY, "ray-ray-1"))
    assert (
        event["status"] == "error"
        and "FakeRayJob ns/ray-ray-1 was deleted before it finished" in event["message"]
    )


def test_a_retry_reattaches_to_the_live_object_of_its_task_instance(cluster: FakeCluster) -> None:
    _submitted()
    retry: Any = {"ti": SimpleNamespace(dag_id="d", task_id="ray", run_id="r", try_number=2, map_index=-1)}
    op = FakeRayOperator(task_id="ray", namespace="ns", queue_name="q", entrypoint="python job.py")
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(retry)
    assert deferred.value.trigger.name == "ray-ray-1" and list(cluster.objects[RAY.api.plural]) == [
        "ray-ray-1"
    ]


def test_the_kind_is_described_once_and_found_by_every_shared_reader(cluster: FakeCluster) -> None:
    assert kinds.describe("FakeRayJob") is RAY and kinds.by_plural("fakerayjobs") is RAY
    ended = {"status": {"jobStatus": "SUCCEEDED"}}
    assert kinds.finished_condition(ended) is not None and kinds.succeeded(ended)
    assert IdentitySeal(b"k" * 32).seal(RAY.kind, "ns", "x", CONTEXT_IDENTITY) != IdentitySeal(
        b"k" * 32
    ).seal("Job", "ns", "x", CONTEXT_IDENTITY), "a seal is bound to the kind"


def test_a_kind_that_misses_part_of_the_interface_cannot_be_made() -> None:
    class NoTrigger(KueueOperator):  # a kind that forgot everything but its description
        description = RAY

    with pytest.raises(TypeError, match=r"abstract.*build_manifest"):
        NoTrigger(task_id="m", namespace="ns", queue_name="q")  # type: ignore[abstract]
