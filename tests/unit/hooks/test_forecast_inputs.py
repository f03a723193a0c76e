"""The forecast's reading of Kueue: a ClusterQueue's flavors with its cohort, the workloads ahead, a pod."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import MaxRetryError

from airflow_kueue_provider.hooks.forecast_inputs import (
    ForecastInputsUnavailable,
    flavor_rooms,
    pod_request,
    read_queue_room,
    workloads_ahead,
)
from airflow_kueue_provider.kueue.progress.forecast import Resources


def cq(name: str, cpu: str, used: str = "0", cohort: str = "", **limits: str) -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": cpu, **limits}, {"name": "memory", "nominalQuota": "64Gi"}]
    return {
        "metadata": {"name": name},
        "spec": {
            **({"cohort": cohort} if cohort else {}),
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "od", "resources": resources}]}
            ],
        },
        "status": {
            "pendingWorkloads": 1,
            "flavorsReservation": [{"name": "od", "resources": [{"name": "cpu", "total": used}]}],
        },
    }


def test_nominal_quota_usage_and_what_the_cohort_lends_within_the_limits() -> None:
    mine = cq("a", "8", used="6", cohort="c", borrowingLimit="3")
    rich = cq("b", "10", used="2", cohort="c")  # 8 free
    stingy = cq("d", "10", used="0", cohort="c", lendingLimit="1")  # lends 1
    elsewhere = cq("e", "100", cohort="other")
    (room,) = flavor_rooms(mine, [mine, rich, stingy, elsewhere])
    assert room.name == "od"
    assert room.nominal == Resources(cpu=8, memory=64 * 2**30)
    assert room.used.cpu == 6
    assert room.borrowable.cpu == 3  # 9 free in the cohort, the borrowing limit 3
    assert room.covered == frozenset({"cpu", "memory"})
    (alone,) = flavor_rooms(cq("x", "8"), [cq("x", "8"), rich])
    assert alone.borrowable.cpu == 0  # no cohort: nothing to borrow


def test_workloads_ahead_the_status_or_the_visibility_api_whichever_says_more() -> None:
    queue = cq("a", "8")
    assert workloads_ahead(queue, None) == 1
    pending = {"items": [{"positionInClusterQueue": 0}, {"positionInClusterQueue": 4}]}
    assert workloads_ahead(queue, pending) == 5


def test_a_pod_request_sums_its_containers_requests_else_limits() -> None:
    pod = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {},
        ]
    }
    assert pod_request(pod) == Resources(cpu=1.5, memory=2**30, gpu=1, pods=1)


class FakeHook:
    def __init__(self, queue: dict[str, Any] | None, error: Exception | None = None) -> None:
        self.queue, self.error = queue, error

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.error is not None:
            raise self.error
        return self.queue

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        return [cq("a", "8")]

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        return None


def test_reading_the_room_and_what_cannot_be_read() -> None:
    room = read_queue_room(FakeHook({"spec": {"clusterQueue": "a"}}), "ns", "lq")  # type: ignore[arg-type]
    assert room.ahead == 1 and room.flavors[0].nominal.cpu == 8
    with pytest.raises(ForecastInputsUnavailable, match="ClusterQueue gone is not among"):
        read_queue_room(FakeHook({"spec": {"clusterQueue": "gone"}}), "ns", "lq")  # type: ignore[arg-type]
    with pytest.raises(ForecastInputsUnavailable, match="403"):
        read_queue_room(FakeHook(None, ApiException(403, "Forbidden")), "ns", "lq")  # type: ignore[arg-type]
    refused = MaxRetryError(None, "/apis", ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]
    with pytest.raises(ForecastInputsUnavailable, match="MaxRetryError"):
        read_queue_room(FakeHook(None, refused), "ns", "lq")  # type: ignore[arg-type]
