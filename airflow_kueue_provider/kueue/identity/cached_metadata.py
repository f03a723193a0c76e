"""What of an object's metadata the shared watch keeps: the keys some follower reads, each value bounded.

The hub (``watch/``) caches every Job carrying the public ``managed-by`` label, every Workload and every
JobSet of a followed namespace. Anyone who can create a Job can set that label, and annotations may hold up
to 256 KiB, so a cache that kept whole metadata would hold whatever a tenant chose to write (800 Jobs with a
200 KiB annotation each: +200 MB in one triggerer). Kept here: the metadata fields the triggers, the
``kueue/`` views and the UI's live feed read from a cached object, the labels and annotations among them
(the provider's identity, seal, uid seal, deadline and escalations; Kueue's, JobSet's and the Job
controller's labels), and of ``ownerReferences`` only the controller's. A kept value longer than
:data:`MAX_VALUE_CHARS` (or its key's own bound) is dropped, not truncated: no legitimate value is that long,
and a reader that finds no seal or identity treats the object as not the provider's (fails closed).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kinds import child_labels
from ..names import (
    DAG_ID_LABEL,
    DEADLINE_ANNOTATION,
    ESCALATIONS_ANNOTATION,
    JOB_NAME_LABEL,
    JOB_UID_LABEL,
    MANAGED_BY_LABEL,
    MAP_INDEX_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    RUN_ID_LABEL,
    SEAL_ANNOTATION,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
    UID_SEAL_ANNOTATION,
)

JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
"""The Job controller's label (on the Job's selector and pods; kept where a Job carries it)."""

_IDENTITY_KEYS = (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL, TRY_NUMBER_LABEL, MAP_INDEX_LABEL)

KEPT_LABELS = frozenset(
    {
        MANAGED_BY_LABEL,
        *_IDENTITY_KEYS,
        QUEUE_NAME_LABEL,
        PRIORITY_CLASS_LABEL,
        JOB_UID_LABEL,
        JOB_NAME_LABEL,
        JOB_CONTROLLER_UID_LABEL,
    }
)
"""Labels a follower reads (ownership and identity pre-selection, the Workload's Job); and every registered
kind's child labels (``kinds.child_labels``: a JobSet's Jobs)."""

KEPT_ANNOTATIONS = frozenset(
    {*_IDENTITY_KEYS, SEAL_ANNOTATION, UID_SEAL_ANNOTATION, DEADLINE_ANNOTATION, ESCALATIONS_ANNOTATION}
)
"""Annotations a follower reads: the full identity, the seals, the deadline and its escalations (UI)."""

KEPT_METADATA_FIELDS = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "labels",
        "annotations",
        "ownerReferences",
    }
)
"""Metadata fields kept at all (``finalizers``, ``managedFields``, ``generateName``... are not read)."""

MAX_VALUE_CHARS = 1024
"""A kept label or annotation value longer than this is dropped: an Airflow dag, task or run id is at most
250 characters, a seal 64, a deadline about 32 (labels are at most 63, by the apiserver)."""
MAX_VALUE_CHARS_BY_KEY: Mapping[str, int] = {ESCALATIONS_ANNOTATION: 16 * 1024}
"""Keys whose legitimate values are longer: the escalations, a JSON list of a few steps and their reasons."""


def max_value_chars(key: str) -> int:
    return MAX_VALUE_CHARS_BY_KEY.get(key, MAX_VALUE_CHARS)


def _kept(values: Any, keys: frozenset[str]) -> dict[str, str]:
    if not isinstance(values, Mapping):
        return {}
    return {
        k: v for k, v in values.items() if k in keys and isinstance(v, str) and len(v) <= max_value_chars(k)
    }


def slim_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata a follower reads, every other field, label and annotation left out (see module doc)."""
    slim = {k: v for k, v in metadata.items() if k in KEPT_METADATA_FIELDS}
    for field, keys in (("labels", KEPT_LABELS | child_labels()), ("annotations", KEPT_ANNOTATIONS)):
        if field in slim:
            slim[field] = _kept(slim[field], keys)
    if "ownerReferences" in slim:
        refs = slim["ownerReferences"] if isinstance(slim["ownerReferences"], list) else []
        controllers = [r for r in refs if isinstance(r, Mapping) and r.get("controller")]
        slim["ownerReferences"] = controllers[:1]  # the apiserver allows one controller
    return slim
