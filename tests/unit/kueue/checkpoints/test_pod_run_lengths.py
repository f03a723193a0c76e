"""Shard lengths from the pods that ran them: the main container's terminated times of a pod that succeeded,
only for indexes that run one shard, the newest pod that says so."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.checkpoints.pod_run_lengths import (
    observed_pod_start,
    pod_run_seconds,
    shard_lengths_from_pods,
)
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet


def _pod(*containers: tuple[str, str, str, int], phase: str = "Succeeded") -> dict[str, Any]:
    return {
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": n, "state": {"terminated": {"exitCode": c, "startedAt": s, "finishedAt": f}}}
                for n, s, f, c in containers
            ],
        }
    }


T0, T12 = "2026-12-05T01:00:00Z", "2026-12-05T01:00:12Z"


def test_the_main_container_of_a_pod_that_succeeded() -> None:
    pod = _pod(("sidecar", T0, "2026-12-05T01:05:00Z", 0), ("main", T0, T12, 0))
    assert pod_run_seconds(pod, "main") == 12.0
    assert pod_run_seconds(pod, None) == 300.0, "no name: the first container"
    assert pod_run_seconds(pod, "gone") == 300.0


def test_no_length_from_a_pod_that_did_not_succeed_or_says_nothing() -> None:
    assert pod_run_seconds(_pod(("main", T0, T12, 0), phase="Failed"), "main") is None
    assert pod_run_seconds(_pod(("main", T0, T12, 137)), "main") is None
    assert pod_run_seconds(_pod(("main", T0, T0, 0)), "main") is None, "not positive"
    assert pod_run_seconds(_pod(("main", "", T12, 0)), "main") is None
    assert pod_run_seconds(_pod(("main", "yesterday", T12, 0)), "main") is None
    assert pod_run_seconds({"status": {"phase": "Succeeded"}}, "main") is None


def test_only_indexes_of_one_shard_and_the_wanted_ones() -> None:
    good = _pod(("main", T0, T12, 0))
    packs = ShardPacks.parse(IndexSet.parse("10-15"), "2x2,1x2")  # indexes 0-1: two shards, 2-3: one
    by_index = {0: [good], 1: [good], 2: [good], 3: [good], 9: [good]}
    assert shard_lengths_from_pods(by_index, packs, IndexSet.parse("10-14")) == {14: 12.0}
    assert shard_lengths_from_pods(by_index, packs, IndexSet.parse("10-15")) == {14: 12.0, 15: 12.0}


def test_the_newest_pod_that_succeeded_speaks_for_its_index() -> None:
    failed = _pod(("main", T0, T12, 1), phase="Failed")
    older = _pod(("main", T0, "2026-12-05T01:00:30Z", 0))
    packs = ShardPacks(IndexSet.range(0, 1))
    assert shard_lengths_from_pods({0: [failed, older]}, packs, IndexSet.range(0, 1)) == {0: 30.0}


def test_the_pods_own_start_is_the_median_from_creation_to_the_container_start() -> None:
    def created(at: str, pod: dict[str, Any]) -> dict[str, Any]:
        return {**pod, "metadata": {"creationTimestamp": at}}

    ok = _pod(("main", T0, T12, 0))
    by_index = {
        0: [created("2026-12-05T00:59:58Z", ok)],  # 2 s
        1: [created("2026-12-05T00:59:59Z", ok), created("2026-12-05T00:59:00Z", ok)],  # the newest: 1 s
        2: [created("2026-12-05T00:59:55Z", ok)],  # 5 s
        3: [created("2026-12-05T00:59:00Z", _pod(("main", T0, T12, 1), phase="Failed"))],  # not counted
    }
    assert observed_pod_start(by_index, "main") == 2.0
    assert observed_pod_start({}, "main") is None
