"""Shard lengths read from the pods that ran them (pure): the shard history's source for programs that do not
use the worker SDK, which writes no done records (docs/shard-history.md).

A pod's length is its main container's ``terminated.finishedAt - startedAt``, as the kubelet reports it
(whole seconds), from a pod that succeeded (exit code 0). Only an index that runs one shard says how long
that shard ran: a pack's pod says nothing of each of its shards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..api_time import parse_api_time
from ..index_set import IndexSet
from .shard_packing import ShardPacks


def pod_run_seconds(pod: Mapping[str, Any], container: str | None) -> float | None:
    """Seconds the main container (``container``, else the first) ran in a pod that succeeded; None when the
    pod did not succeed or its times are missing, unreadable or not positive."""
    status = pod.get("status") or {}
    if status.get("phase") != "Succeeded":
        return None
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, Mapping)]
    main = next((s for s in statuses if container and s.get("name") == container), None)
    if main is None and statuses:
        main = statuses[0]
    ended = ((main or {}).get("state") or {}).get("terminated") or {}
    if ended.get("exitCode") != 0:
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
