"""The shared watch keeps of each object only what a follower reads: the read labels and annotations (a
tenant's 200 KiB annotation is not kept), each value bounded, and what it keeps still reads as before (the
seal verifies, the identity, the deadline and escalations, the Workload's Job and the JobSet's Jobs)."""

from __future__ import annotations

import copy
import json
from typing import Any

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.identity.cached_metadata import (
    KEPT_ANNOTATIONS,
    KEPT_LABELS,
    MAX_VALUE_CHARS,
)
from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal
from airflow_kueue_provider.kueue.identity.job_ownership import belongs_to_try, is_managed
from airflow_kueue_provider.kueue.kinds import child_labels, workload_owner_uid
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET
from airflow_kueue_provider.kueue.names import (
    DEADLINE_ANNOTATION,
    ESCALATIONS_ANNOTATION,
    JOB_UID_LABEL,
    JOBSET_NAME_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    QUEUE_NAME_LABEL,
    REPLICATED_JOB_LABEL,
    SEAL_ANNOTATION,
    UID_SEAL_ANNOTATION,
)
from airflow_kueue_provider.kueue.progress.deadline import deadline_of
from airflow_kueue_provider.watch.cache import NamespaceCache

SEAL = IdentitySeal(b"k" * 32)
IDENTITY = AirflowIdentity("dag", "task", "run-1", try_number=2)
BIG = "x" * (200 * 1024)


def sealed_job(name: str = "job-a", uid: str = "uid-a") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team",
        "uid": uid,
        "resourceVersion": "7",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "finalizers": [f"example.com/f{i}" for i in range(100)],
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}],
        "labels": {
            **IDENTITY.labels(),
            MANAGED_BY_LABEL: MANAGED_BY_VALUE,
            QUEUE_NAME_LABEL: "lq",
            JOBSET_NAME_LABEL: "js",
            REPLICATED_JOB_LABEL: "workers",
            "team.example.com/anything": "v",
        },
        "annotations": {
            **IDENTITY.annotations(),
            DEADLINE_ANNOTATION: "2026-01-01T06:00:00+00:00",
            ESCALATIONS_ANNOTATION: json.dumps([{"step": "notify", "at": "t", "detail": "sent", "why": "w"}]),
            "flood.example.com/blob": BIG,
        },
        "ownerReferences": [
            {"kind": "JobSet", "name": "js", "uid": "js-uid", "controller": True},
            {"kind": "Other", "name": "o", "uid": "o-uid", "controller": False, "blob": BIG},
        ],
    }
    meta["annotations"].update(SEAL.annotations("Job", "team", name, IDENTITY))
    meta["annotations"].update(SEAL.uid_annotations("Job", {"metadata": meta}))
    return {
        "metadata": meta,
        "spec": {"completions": 4, "template": {"spec": {"containers": [{"name": "c", "image": BIG}]}}},
        "status": {"active": 1},
    }


def test_only_read_keys_are_kept_and_they_read_as_before() -> None:
    job = sealed_job()
    original = copy.deepcopy(job)
    cache = NamespaceCache()
    cache._replace("jobs", [job])
    kept = cache.slot("jobs")["job-a"]
    meta = kept["metadata"]
    assert set(meta["labels"]) <= KEPT_LABELS | child_labels()
    assert "team.example.com/anything" not in meta["labels"]
    assert set(meta["annotations"]) <= KEPT_ANNOTATIONS
    assert "flood.example.com/blob" not in meta["annotations"]
    assert "finalizers" not in meta and "managedFields" not in meta and "template" not in kept["spec"]
    assert meta["ownerReferences"] == [original["metadata"]["ownerReferences"][0]]
    assert cache.retained_bytes < 4096, "a 200 KiB annotation is not retained"
    # what the followers read still reads the same from the slim copy
    assert SEAL.is_sealed("Job", kept) and SEAL.uid_seal_state("Job", kept) == "valid"
    assert is_managed(kept) and belongs_to_try(kept, IDENTITY)
    assert deadline_of(kept) == deadline_of(original)
    assert workload_owner_uid(kept) == workload_owner_uid(original) == "js-uid"
    assert cache.snapshot(JOBSET, "js").children == (kept,)
    assert kept["spec"]["completions"] == 4 and kept["status"] == {"active": 1}


def test_a_kept_key_with_an_overlong_value_is_dropped_not_truncated() -> None:
    job = sealed_job()
    job["metadata"]["annotations"][SEAL_ANNOTATION] = BIG
    job["metadata"]["annotations"][UID_SEAL_ANNOTATION] = "u" * (MAX_VALUE_CHARS + 1)
    cache = NamespaceCache()
    cache._apply("jobs", "ADDED", job)
    kept = cache.slot("jobs")["job-a"]
    assert SEAL_ANNOTATION not in kept["metadata"]["annotations"]
    assert UID_SEAL_ANNOTATION not in kept["metadata"]["annotations"]
    assert not SEAL.is_sealed("Job", kept), "no seal: not the provider's (fails closed)"
    assert ESCALATIONS_ANNOTATION in kept["metadata"]["annotations"], "a longer bound for escalations"


def test_a_workload_keeps_its_job_uid_label_and_the_bytes_are_counted_down_on_delete() -> None:
    cache = NamespaceCache()
    workload = {
        "metadata": {
            "name": "wl",
            "uid": "w1",
            "labels": {JOB_UID_LABEL: "uid-a", "x": BIG[:60]},
            "annotations": {"flood": BIG},
            "ownerReferences": [{"kind": "Job", "name": "a", "uid": "uid-a", "controller": True}],
        },
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"x": BIG}}}]},
    }
    cache._apply_workload("ADDED", copy.deepcopy(workload))
    assert cache.workloads["uid-a"]["metadata"]["labels"] == {JOB_UID_LABEL: "uid-a"}
    assert 0 < cache.retained_bytes < 1024
    cache._apply_workload("DELETED", workload)
    assert cache.workloads == {} and cache.retained_bytes == 0
