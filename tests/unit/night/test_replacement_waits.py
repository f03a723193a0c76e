"""The night's report: how long an index waited for its next pod after a disrupted one (the Job controller's
pod failure backoff, which the time compression does not shrink)."""

from __future__ import annotations

from typing import Any

from tests.integration.night.report import replacement_waits


def _pod(
    uid: str, index: int, created: float, ended: float | None, phase: str, disrupted: bool
) -> dict[str, Any]:
    return {
        "job_uid": uid,
        "index": index,
        "created": created,
        "ended": ended,
        "phase": phase,
        "disrupted": disrupted,
    }


def test_each_disrupted_pod_is_timed_to_its_indexs_next_pod() -> None:
    pods = [
        _pod("a", 0, 0.0, 4.0, "Failed", True),  # evicted at 4, the next pod of index 0 at 14
        _pod("a", 0, 14.0, 20.0, "Succeeded", False),
        _pod("a", 1, 0.0, 3.0, "Failed", True),  # evicted at 3, again at 19, done at 40
        _pod("a", 1, 13.0, 19.0, "Failed", True),
        _pod("a", 1, 39.5, 45.0, "Succeeded", False),
        _pod("b", 0, 0.0, 5.0, "Failed", False),  # a failure of its own: not a disruption
        _pod("b", 0, 16.0, 20.0, "Succeeded", False),
        _pod("b", 1, 0.0, 5.0, "Succeeded", True),  # disrupted, yet Succeeded: nothing to replace
        _pod("b", 2, 0.0, 5.0, "Failed", True),  # the last pod of its index: no next one
    ]
    assert replacement_waits({"pods": pods}) == {
        "replacement_wait_median": 10.0,
        "replacement_wait_sum": 40.5,
        "replacements": 3,
    }


def test_a_night_without_disruptions_has_no_median() -> None:
    assert replacement_waits({"pods": []}) == {
        "replacement_wait_median": None,
        "replacement_wait_sum": 0.0,
        "replacements": 0,
    }
