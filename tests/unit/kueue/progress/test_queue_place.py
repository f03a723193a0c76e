"""Where the Job's own Workload stands once Kueue has tried it: admitted, or behind how many."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kueue_provider.kueue.progress.forecast import OwnAdmission
from airflow_kueue_provider.kueue.progress.queue_place import own_admission, place_of, waiting_ahead

NOW = datetime(2026, 12, 5, 1, 0, 30, tzinfo=UTC)


def wl(
    name: str, created: str, priority: int = 100, reserved: bool = False, queue: str = "lq"
) -> dict[str, Any]:
    condition = {"type": "QuotaReserved", "status": "True" if reserved else "False"}
    condition["lastTransitionTime"] = "2026-12-05T01:00:20Z"
    return {
        "metadata": {"name": name, "uid": f"u-{name}", "creationTimestamp": f"2026-12-05T01:00:{created}Z"},
        "spec": {"queueName": queue, "priority": priority},
        "status": {"conditions": [condition]},
    }


def test_an_admitted_workload_says_its_cpu_flavor_and_since_when() -> None:
    own = wl("own", "10", reserved=True)
    own["status"]["admission"] = {
        "podSetAssignments": [{"name": "main", "flavors": {"memory": "spot-mem", "cpu": "spot"}}]
    }
    assert own_admission(own, NOW) == OwnAdmission("spot", 10.0)
    assert own_admission(wl("own", "10"), NOW) is None, "pending: no admission"


def test_the_visibility_position_is_the_place_when_listed() -> None:
    own = wl("own", "10")
    pending = {
        "items": [
            {"metadata": {"name": "x"}, "positionInClusterQueue": 0},
            {"metadata": {"name": "own"}, "positionInClusterQueue": 4},
        ]
    }
    assert place_of(own, pending, [], 100) == 4


def test_without_the_list_those_kueue_orders_before_it_in_the_page() -> None:
    own = wl("own", "10")
    page = [
        own,
        wl("earlier", "09"),  # same priority, created before: ahead
        wl("a-same-second", "10"),  # same second, name before "own": ahead (an even guess: Kueue ties freely)
        wl("zz-same-second", "10"),  # same second, after by name: behind
        wl("later", "11"),  # behind
        wl("urgent", "12", priority=300),  # higher priority: ahead whenever made
        wl("admitted", "01", reserved=True),  # holds quota: not waiting
        wl("elsewhere", "01", queue="other"),  # another LocalQueue
    ]
    assert place_of(own, None, page, 100) == 3
    assert place_of(own, {"items": []}, page, None) == 3, "its own priority when the task's is unknown"


def test_the_waiting_ahead_in_kueues_order_of_a_new_workload_and_of_the_own() -> None:
    page = [
        wl("late", "20"),
        wl("early", "05"),
        wl("urgent", "25", priority=500),
        wl("low", "01", priority=10),
        wl("running", "00", reserved=True),
        wl("elsewhere", "00", queue="other"),
    ]
    names = lambda found: [w["metadata"]["name"] for w in found]  # noqa: E731
    assert names(waiting_ahead(page, "lq", 100)) == ["urgent", "early", "late"]
    assert names(waiting_ahead(page, "lq", None)) == ["urgent", "early", "late", "low"]
    own = wl("own", "10")
    assert names(waiting_ahead([*page, own], "lq", None, own)) == ["urgent", "early"]
    assert names(waiting_ahead([*page, own], "lq", 600, own)) == [], "its priority from the caller"
