"""``on_deadline_risk spill_to``: moving a waiting run's unfinished shards to another LocalQueue (pure).

A spill must never run a shard twice to completion. Kubernetes cannot stop an Indexed Job from starting its
remaining indexes without killing the pods that run, and Kueue does not shrink an admitted non-elastic Job.
So a spill is taken only while the first Job holds no quota and has no pod left (waiting for its first
admission, or put back in the queue by an eviction or preemption): then it is deleted, conditionally on its
``resourceVersion`` (Kueue may admit it at any moment; a changed Job is not deleted), its finished shards
stay in the ledger, and the unfinished ones go, in a second Job, to the spill queue. While the first Job
runs, the spill waits, and is taken if Kueue puts the Job back in its queue before the run ends.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ..index_set import IndexSet
from ..kinds import finished_condition
from ..names import QUEUE_NAME_LABEL

SPILL_NAME_VARIANT = "spill"
"""Hashed into the second Job's name: deterministic per try, never the first Job's name."""
SPILLED_STATUS = "spilled"
"""The ledger status of an attempt whose unfinished shards went to a spill Job."""
WAITING = "waiting: "
"""How a spill step that has not happened yet begins (the step is listed, and taken later)."""
MAX_SHARDS_TEXT = 120


def not_spillable_because(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> str | None:
    """Why ``job`` cannot be spilled now (None: it can). ``pods`` are the Job's pods as listed now."""
    if finished_condition(job) is not None:
        return "the Job has finished"
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if len(IndexSet.parse(status.get("completedIndexes"))) >= int(spec.get("completions") or 0):
        return "every shard of the Job has finished"
    if not spec.get("suspend"):
        return (
            "the Job holds quota and runs; running shards are never stopped, so the spill is taken if "
            "Kueue puts the Job back in its queue (eviction, preemption) before it finishes"
        )
    alive = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    stopping = int(status.get("active") or 0) + int(status.get("terminating") or 0)
    uncounted = status.get("uncountedTerminatedPods") or {}
    if alive or stopping:
        return f"{max(len(alive), stopping)} pod(s) of the Job are still stopping"
    if uncounted.get("succeeded") or uncounted.get("failed"):
        return "the Job controller has not counted the Job's last finished pods yet"
    return None


def spill_manifest(manifest: Mapping[str, Any], name: str, queue_name: str) -> dict[str, Any]:
    """The second Job: ``manifest`` (the first Job's, as the operator builds it) named ``name`` and queued
    in ``queue_name``. Its shards are set afterwards, as for a retry (``CheckpointSession.shape_job``)."""
    second = copy.deepcopy(dict(manifest))
    metadata = second["metadata"]
    metadata["name"] = name
    metadata.setdefault("labels", {})[QUEUE_NAME_LABEL] = queue_name
    return second


def spill_taken(steps: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the escalations listed include a spill that happened (not one still waiting, or failed)."""
    return any(s.get("step") == "spill_to" and str(s.get("detail", "")).startswith("moved ") for s in steps)


def spilled_detail(shards: IndexSet, job_name: str, queue_name: str, first_job: str) -> str:
    """The escalation's ``detail`` once spilled (the shard list shortened: it can have many intervals)."""
    text = str(shards)
    if len(text) > MAX_SHARDS_TEXT:
        text = text[:MAX_SHARDS_TEXT].rsplit(",", 1)[0] + ",..."
    return (
        f"moved {len(shards)} unfinished shard(s) ({text}) to Job {job_name} in LocalQueue {queue_name}; "
        f"Job {first_job} deleted before it held quota"
    )
