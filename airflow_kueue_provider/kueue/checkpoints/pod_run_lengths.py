"""Shard lengths read from the pods that ran them (pure): the shard history's source for programs that do not
use the worker SDK, which writes no done records (docs/shard-history.md).

A pod's length is its main container's ``terminated.finishedAt - startedAt``, as the kubelet reports it
(whole seconds), from a pod that succeeded (exit code 0). Only an index that runs one shard says how long
that shard ran: a pack's pod says nothing of each of its shards.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..api_time import parse_api_time
from ..index_set import IndexSet
from .shard_packing import ShardPacks


def _ended(pod: Mapping[str, Any], container: str | None) -> Mapping[str, Any] | None:
    """The main container's (``container``, else the first) terminated state in a pod that succeeded."""
    status = pod.get("status") or {}
    if status.get("phase") != "Succeeded":
        return None
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, Mapping)]
    main = next((s for s in statuses if container and s.get("name") == container), None)
    if main is None and statuses:
        main = statuses[0]
    ended = ((main or {}).get("state") or {}).get("terminated") or {}
    return ended if ended.get("exitCode") == 0 else None


def pod_run_seconds(pod: Mapping[str, Any], container: str | None) -> float | None:
    """Seconds the main container (``container``, else the first) ran in a pod that succeeded; None when the
    pod did not succeed or its times are missing, unreadable or not positive."""
    ended = _ended(pod, container)
    if ended is None:
        return None
    started, finished = parse_api_time(ended.get("startedAt")), parse_api_time(ended.get("finishedAt"))
    if started is None or finished is None:
        return None
    seconds = (finished - started).total_seconds()
    return seconds if seconds > 0 else None


def shard_lengths_from_pods(
    pods_by_index: Mapping[int, Sequence[Mapping[str, Any]]],
    packs: ShardPacks,
    wanted: IndexSet,
    container: str | None = None,
) -> dict[int, float]:
    """``{shard id: seconds}`` for the shards of ``wanted`` whose index runs that one shard alone, from the
    newest pod of the index that succeeded (``pods_by_index``: the Job's own pods, newest first)."""
    lengths: dict[int, float] = {}
    for index, pods in pods_by_index.items():
        if not 0 <= index < packs.index_count:
            continue
        shards = packs.shards_of_index(index)
        if len(shards) != 1:
            continue
        shard = next(iter(shards))
        if shard not in wanted:
            continue
        seconds = next((s for s in (pod_run_seconds(p, container) for p in pods) if s is not None), None)
        if seconds is not None:
            lengths[shard] = seconds
    return lengths


def observed_pod_start(
    pods_by_index: Mapping[int, Sequence[Mapping[str, Any]]], container: str | None = None
) -> float | None:
    """The median seconds from a pod's creation to its main container's start, over the newest pod of each
    index that succeeded: what a pod cost before its shard, seen directly (an attempt with an eviction gives
    no running time to infer it from). None without such a pod."""
    waits = []
    for pods in pods_by_index.values():
        for pod in pods:
            ended = _ended(pod, container)
            created = parse_api_time((pod.get("metadata") or {}).get("creationTimestamp"))
            started = parse_api_time(ended.get("startedAt")) if ended is not None else None
            if created is not None and started is not None:
                waits.append(max(0.0, (started - created).total_seconds()))
                break
    return round(statistics.median(waits), 1) if waits else None
