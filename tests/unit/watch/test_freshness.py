"""A watch's delivered objects show it current up to their last write: the periodic LIST waits a period
from the newest such evidence; an object written "in our future" beyond the allowed skew proves nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kueue_provider.watch.freshness import WatchCurrency


class Clocks:
    def __init__(self) -> None:
        self.wall, self.mono = 1_800_000_000.0, 500.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def written(at: float) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": "a", "managedFields": [{"manager": "kueue", "time": stamp}]}}


def currency(clocks: Clocks) -> WatchCurrency:
    return WatchCurrency(10.0, wall=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def test_a_list_is_due_a_period_after_the_last_evidence() -> None:
    clocks = Clocks()
    watched = currency(clocks)
    watched.listed("jobs", clocks.mono)
    clocks.advance(100)
    assert watched.due_in("jobs", 120) == 20
    watched.delivered("jobs", written(clocks.wall - 3))  # written 3 s ago: current as of then
    assert watched.due_in("jobs", 120) == 117
    clocks.advance(200)
    assert watched.due_in("jobs", 120) <= 0


def test_an_old_write_is_older_evidence_and_never_moves_it_back() -> None:
    clocks = Clocks()
    watched = currency(clocks)
    watched.listed("jobs", clocks.mono)
    clocks.advance(60)
    watched.delivered("jobs", written(clocks.wall - 3600))  # a late event of an hour-old write
    assert watched.due_in("jobs", 120) == 60
    watched.delivered("jobs", {"metadata": {"name": "a"}})  # no managedFields: no evidence
    assert watched.due_in("jobs", 120) == 60


def test_each_kind_keeps_its_own_evidence() -> None:
    clocks = Clocks()
    watched = currency(clocks)
    watched.listed("jobs", clocks.mono)
    watched.listed("workloads", clocks.mono)
    clocks.advance(100)
    watched.delivered("jobs", written(clocks.wall))
    assert watched.due_in("jobs", 120) == 120 and watched.due_in("workloads", 120) == 20


def test_a_write_beyond_the_skew_in_our_future_proves_nothing() -> None:
    clocks = Clocks()
    watched = currency(clocks)
    watched.listed("jobs", clocks.mono)
    clocks.advance(100)
    watched.delivered("jobs", written(clocks.wall + 60))  # the apiserver's clock a minute ahead
    assert watched.due_in("jobs", 120) == 20
    watched.delivered("jobs", written(clocks.wall + 5))  # within the skew: as of now
    assert watched.due_in("jobs", 120) == 120


def test_without_any_evidence_a_list_is_due_a_period_after_the_first_ask() -> None:
    clocks = Clocks()
    watched = currency(clocks)
    assert watched.due_in("jobs", 120) == 120
    clocks.advance(120)
    assert watched.due_in("jobs", 120) <= 0
