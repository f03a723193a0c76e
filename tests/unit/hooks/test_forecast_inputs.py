"""The forecast's reading of Kueue: a ClusterQueue's flavors with its cohort, the workloads ahead, a pod."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import MaxRetryError

from airflow_kueue_provider.hooks.forecast_inputs import (
    HELD_READ_LIMIT,
    ForecastInputsUnavailable,
    flavor_rooms,
    pending_in_page,
    queued_workload,
    read_priority,
    read_queue_room,
    workloads_ahead,
)
from airflow_kueue_provider.kueue.progress.forecast import HeldQuota, Resources, WaitingQuota
from tests.unit.hooks.test_workload_quota import workload


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


def listed(*workloads: tuple[int, int]) -> dict[str, Any]:
    """This LocalQueue's pending Workloads as the visibility API lists them: (priority, position in CQ)."""
    return {"items": [{"priority": q, "positionInClusterQueue": p} for q, p in workloads]}


def pending_cq(count: int) -> dict[str, Any]:
    queue = cq("a", "8")
    queue["status"]["pendingWorkloads"] = count
    return queue


def test_a_higher_priority_workload_jumps_the_pending_lower_ones() -> None:
    five_low = listed(*((100, p) for p in range(5)))
    assert workloads_ahead(pending_cq(5), five_low, 300) == 0
    # Kueue's order puts only lower ones after one below: a truncated list, a stale status count say no more.
    assert workloads_ahead(pending_cq(1200), listed(*((100, p) for p in range(1000))), 300) == 0
    mixed = listed((500, 0), (300, 1), (100, 2), (100, 3))
    assert workloads_ahead(pending_cq(4), mixed, 300) == 2  # the 500 and the equal 300, not the two at 100


def test_equal_priority_pending_workloads_are_ahead() -> None:
    assert workloads_ahead(pending_cq(3), listed((100, 0), (100, 1), (100, 2)), 100) == 3
    assert workloads_ahead(pending_cq(2), listed((0, 0), (0, 1)), 0) == 2  # no class: priority 0 each


def test_an_unknown_priority_counts_every_pending_workload_as_before() -> None:
    five_low = listed(*((100, p) for p in range(5)))
    assert workloads_ahead(pending_cq(5), five_low, None) == 5
    assert workloads_ahead(pending_cq(5), five_low) == 5
    assert workloads_ahead(pending_cq(2), five_low, None) == 5  # the visibility list places more


def test_other_local_queues_pending_workloads_are_counted_whatever_their_priority() -> None:
    # Five of other LocalQueues first (their priority unseen), then this one's two lower ones.
    assert workloads_ahead(pending_cq(7), listed((100, 5), (100, 6)), 300) == 5
    # Nothing of this LocalQueue below the task: every workload not listed may be ahead.
    assert workloads_ahead(pending_cq(7), listed((300, 0)), 300) == 7
    truncated = listed(*((500, p) for p in range(1000)))  # the list's limit: the rest may be ahead too
    assert workloads_ahead(pending_cq(1200), truncated, 300) == 1200
    assert workloads_ahead(pending_cq(3), None, 300) == 3  # no visibility API: the status count
    # Before one of this LocalQueue's at the task's priority or above: ahead, even with a stale status.
    assert workloads_ahead(pending_cq(0), listed((300, 4)), 300) == 5


class FakeHook:
    def __init__(
        self,
        queue: dict[str, Any] | None,
        error: Exception | None = None,
        classes: dict[str, Any] | None = None,
    ) -> None:
        self.queue, self.error, self.classes = queue, error, classes or {}
        self.class_reads: list[str] = []
        self.page_limits: list[int] = []
        self.workloads: list[dict[str, Any]] | Exception = []

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.error is not None:
            raise self.error
        return self.queue

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        return [cq("a", "8")]

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        return listed((100, 0))

    def workloads_page(self, namespace: str, limit: int) -> list[dict[str, Any]]:
        self.page_limits.append(limit)
        if isinstance(self.workloads, Exception):
            raise self.workloads
        return self.workloads

    def get_workload_priority_class(self, name: str) -> dict[str, Any] | None:
        self.class_reads.append(name)
        found = self.classes.get(name)
        if isinstance(found, Exception):
            raise found
        return found


def test_reading_the_room_and_what_cannot_be_read() -> None:
    room = read_queue_room(FakeHook({"spec": {"clusterQueue": "a"}}), "ns", "lq")
    assert room.ahead == 1 and room.flavors[0].nominal.cpu == 8
    assert read_queue_room(FakeHook({"spec": {"clusterQueue": "a"}}), "ns", "lq", 300).ahead == 0
    with pytest.raises(ForecastInputsUnavailable, match="ClusterQueue gone is not among"):
        read_queue_room(FakeHook({"spec": {"clusterQueue": "gone"}}), "ns", "lq")
    with pytest.raises(ForecastInputsUnavailable, match="403"):
        read_queue_room(FakeHook(None, ApiException(403, "Forbidden")), "ns", "lq")
    refused = MaxRetryError(None, "/apis", ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]
    with pytest.raises(ForecastInputsUnavailable, match="MaxRetryError"):
        read_queue_room(FakeHook(None, refused), "ns", "lq")


def labelled(priority_class: str | None = None, pod_class: str | None = None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/priority-class": priority_class} if priority_class else {}
    pod = {"priorityClassName": pod_class} if pod_class else {}
    return {"metadata": {"labels": labels}, "spec": {"template": {"spec": pod}}}


def test_the_task_priority_is_its_workload_priority_class_value_else_0() -> None:
    hook = FakeHook(None, classes={"gather": {"value": 300}, "odd": {"value": "high"}})
    assert read_priority(hook, labelled("gather")) == 300
    assert read_priority(hook, labelled()) == 0 and hook.class_reads == ["gather"]  # no label: no read
    with pytest.raises(ForecastInputsUnavailable, match="WorkloadPriorityClass gone not found"):
        read_priority(hook, labelled("gone"))
    with pytest.raises(ForecastInputsUnavailable, match="value 'high'"):
        read_priority(hook, labelled("odd"))
    with pytest.raises(ForecastInputsUnavailable, match="PriorityClass batch-high is not read"):
        read_priority(hook, labelled(pod_class="batch-high"))  # Kueue would take the pods' class
    forbidden = FakeHook(None, classes={"gather": ApiException(403, "Forbidden")})
    with pytest.raises(ForecastInputsUnavailable, match="WorkloadPriorityClass gather: 403 Forbidden"):
        read_priority(forbidden, labelled("gather"))
    refused = MaxRetryError(None, "/apis", ConnectionRefusedError(111, "Connection refused"))  # type: ignore[arg-type]
    with pytest.raises(ForecastInputsUnavailable, match="MaxRetryError"):
        read_priority(FakeHook(None, classes={"gather": refused}), labelled("gather"))


def test_the_room_reads_one_page_of_workloads_and_an_unreadable_one_is_none_seen() -> None:
    hook = FakeHook({"spec": {"clusterQueue": "a"}})
    hook.workloads = [workload()]
    now = datetime(2026, 12, 5, 1, 1, tzinfo=UTC)
    room = read_queue_room(hook, "ns", "lq", None, now)
    assert room.held == (HeldQuota("spot", Resources(cpu=8, memory=8 * 2**30), 60.0),)
    assert hook.page_limits == [HELD_READ_LIMIT]
    hook.workloads = ApiException(403, "Forbidden")
    assert read_queue_room(hook, "ns", "lq", None, now).held == ()


def test_workloads_made_in_the_same_second_are_ahead_before_the_visibility_list_has_them() -> None:
    """A mapped task's instances start together: the page shows their Workloads waiting before any list."""

    def waiting(queue: str, priority: int, reserved: bool = False) -> dict[str, Any]:
        conditions = [{"type": "QuotaReserved", "status": "True"}] if reserved else []
        return {"spec": {"queueName": queue, "priority": priority}, "status": {"conditions": conditions}}

    page = [waiting("lq", 100), waiting("lq", 300), waiting("lq", 100, reserved=True), waiting("other", 500)]
    assert pending_in_page(page, "lq", 100) == 2
    assert pending_in_page(page, "lq", 300) == 1
    assert pending_in_page(page, "lq", None) == 2
    hook = FakeHook({"spec": {"clusterQueue": "a"}})
    hook.workloads = page
    assert read_queue_room(hook, "ns", "lq", 100).ahead == 2, "more than the visibility list's one"


def test_the_workloads_waiting_ahead_in_the_namespace_are_read_with_what_they_ask_for() -> None:
    def waiting(name: str, pods: int, cpu: str, priority: int = 100) -> dict[str, Any]:
        template = {"spec": {"containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}
        return {
            "metadata": {"name": name, "uid": name, "creationTimestamp": f"2026-12-05T01:00:{pods:02d}Z"},
            "spec": {
                "queueName": "lq",
                "priority": priority,
                "podSets": [{"count": pods, "template": template}],
            },
            "status": {"conditions": []},
        }

    hook = FakeHook({"spec": {"clusterQueue": "a"}})
    hook.workloads = [waiting("b", 24, "1"), waiting("a", 2, "lots"), waiting("c", 50, "500m", 10)]
    room = read_queue_room(hook, "ns", "lq", 100)
    assert room.ahead == 2
    assert room.waiting == (
        WaitingQuota(None),  # its CPU unreadable: a Job like the task's
        WaitingQuota(Resources(cpu=24, memory=24 * 2**30, pods=24)),
    ), "in Kueue's order (created first), the lower priority one not ahead"


class Changes:
    """``workload_changes`` playing a script: a Workload (an event), None (quiet for the settle time), or an
    error; each step moves the clock by ``step`` seconds."""

    def __init__(self, clock: Clock, *script: dict[str, Any] | Exception | None, step: float = 0.1) -> None:
        self.clock, self.script, self.step, self.calls = clock, list(script), step, 0

    def workload_changes(
        self, namespace: str, job_uid: str, quiet_seconds: float, seconds: float
    ) -> Iterator[dict[str, Any] | None]:
        self.calls += 1
        for answer in self.script:
            self.clock.now += quiet_seconds if answer is None else self.step
            if isinstance(answer, Exception):
                raise answer
            yield answer


class Clock:
    def __init__(self) -> None:
        self.now: float = 0.0


def test_the_job_s_workload_is_followed_until_it_is_in_kueue_s_queue() -> None:
    made = {"metadata": {"name": "w"}, "status": {"conditions": []}}
    tried = {
        "metadata": {"name": "w"},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]},
    }
    clock = Clock()
    hook = Changes(clock, None, made, tried, made)
    assert queued_workload(hook, "ns", "uid", 10, lambda: clock.now) is tried  # type: ignore[arg-type]
    assert hook.calls == 1, "one WATCH"
    clock = Clock()  # behind others: Kueue tries only a queue's head, so it is queued but never tried
    assert queued_workload(Changes(clock, made, None, tried), "ns", "uid", 10, lambda: clock.now) is made  # type: ignore[arg-type]
    assert clock.now == 1.1, "a quiet second after it was seen"
    clock = Clock()  # changed again and again (its conditions, not yet tried): queued a second after seen
    busy = Changes(clock, *[made] * 30, step=0.25)
    assert queued_workload(busy, "ns", "uid", 10, lambda: clock.now) is made  # type: ignore[arg-type]
    assert clock.now == 1.25
    clock = Clock()
    assert queued_workload(Changes(clock, None, None), "ns", "uid", 10, lambda: clock.now) is None  # type: ignore[arg-type]
    clock = Clock()
    failing = Changes(clock, ApiException(403, "Forbidden"))
    assert queued_workload(failing, "ns", "uid", 10, lambda: clock.now) is None  # type: ignore[arg-type]
    assert clock.now == 0.1, "an unreadable Workload: no forecast again, no wait"


def test_once_queued_the_room_says_its_own_place_or_its_admission() -> None:
    hook = FakeHook({"spec": {"clusterQueue": "a"}})
    now = datetime(2026, 12, 5, 1, 0, 30, tzinfo=UTC)
    own = {
        "metadata": {"name": "own", "uid": "u", "creationTimestamp": "2026-12-05T01:00:10Z"},
        "spec": {"queueName": "lq", "priority": 100},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]},
    }
    hook.pending_workloads = lambda ns, lq: {  # type: ignore[method-assign]
        "items": [{"metadata": {"name": "own"}, "priority": 100, "positionInClusterQueue": 3}]
    }
    assert read_queue_room(hook, "ns", "lq", 100, now, None, own).ahead == 3, "Kueue's own position"
    admitted = workload(reserved_at="2026-12-05T01:00:20Z")
    admitted["metadata"] = own["metadata"]
    room = read_queue_room(hook, "ns", "lq", 100, now, None, admitted)
    assert room.admitted is not None and room.admitted.flavor == "spot" and room.admitted.held_for == 10.0
