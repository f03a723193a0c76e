"""Which Jobs a task instance may adopt, reattach to or delete: only its own, by full identity.

Labels are hashed when a value is too long or has characters a label value cannot carry, so two run ids
(``manual__2026-05-01T10:00:00+00:00`` and ``manual__2026-05-01T10_00_00_00_00-<hash>``) can give the same
labels. Labels only pre-select (a server-side selector); the decision is made here, on the unhashed identity
the provider writes into the Job's annotations and on the managed-by label. Those are public, so what makes
an object the task's is its seal (``kueue.identity.identity_seal``): ``sort_by_seal``. Pure policy, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal

from ..kinds import finished_condition
from ..names import (
    DAG_ID_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MAP_INDEX_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
)

_TASK_INSTANCE_KEYS = (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL, MAP_INDEX_LABEL)


def _metadata(job: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = job.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def is_managed(job: Mapping[str, Any]) -> bool:
    """The Job carries this provider's managed-by label."""
    labels = _metadata(job).get("labels") or {}
    return bool(labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE)


def belongs_to_task_instance(job: Mapping[str, Any], identity: AirflowIdentity) -> bool:
    """Made by this provider for exactly this (dag, task, run, map index), any try."""
    if not is_managed(job):
        return False
    annotations = _metadata(job).get("annotations") or {}
    wanted = identity.annotations()
    return all(annotations.get(key) == wanted[key] for key in _TASK_INSTANCE_KEYS)


def belongs_to_try(job: Mapping[str, Any], identity: AirflowIdentity) -> bool:
    """Made by this provider for exactly this task instance and try (what a 409 on create may adopt)."""
    annotations = _metadata(job).get("annotations") or {}
    return belongs_to_task_instance(job, identity) and annotations.get(TRY_NUMBER_LABEL) == str(
        identity.try_number
    )


def is_same_object(job: Mapping[str, Any] | None, uid: str | None) -> bool:
    """``job`` is the object recorded at create (same UID); a Job re-created under the name is another one."""
    return job is not None and (uid is None or _metadata(job).get("uid") == uid)


def delete_unless_finished_step(
    job: Mapping[str, Any] | None, uid: str | None, last_attempt: bool
) -> str | dict[str, Any]:
    """One step of "delete the Job unless it finished", after a fresh read of it: "gone" (no Job, or a
    namesake that is another object), "finished" (kept: it holds nothing and is the run's record), or the
    DeleteOptions body to send. The delete is conditioned on the UID read, and on its resourceVersion so a
    Job that finishes in between is kept -- except on the last attempt: a big running Job changes with every
    pod, so after a few conflicts it goes without that second condition."""
    if job is None or (uid and _metadata(job).get("uid") != uid):
        return "gone"
    if finished_condition(job) is not None:
        return "finished"
    preconditions: dict[str, Any] = {"uid": _metadata(job).get("uid")}
    if not last_attempt:
        preconditions["resourceVersion"] = _metadata(job).get("resourceVersion")
    return {"propagationPolicy": "Background", "preconditions": preconditions}


@dataclass(frozen=True)
class SealedObjects:
    """A task instance's objects (as listed by its labels) sorted by their seals (``sort_by_seal``)."""

    ours: list[dict[str, Any]]
    """Adoptable: this try's with a valid name seal; an earlier try's with a valid uid seal (a kind without
    uid seals: a valid name seal). Oldest first, as listed."""
    unconfirmed: list[dict[str, Any]]
    """An earlier try's live Jobs with a valid name seal and no uid seal (their worker died between create and
    patch, or a copy stripped of it): deleted by uid, never adopted."""
    ignored: list[dict[str, Any]]
    """They carry the task's labels but not its seal (or a uid seal over another uid): never adopted, never
    deleted, never shown."""


def sort_by_seal(
    objs: list[dict[str, Any]], identity: AirflowIdentity, seal: IdentitySeal, kind: str, uid_sealed: bool
) -> SealedObjects:
    """The reattach rules of docs/tenancy.md ("Reattach and the identity seal"); ``uid_sealed``: the kind
    gets a uid seal after create (the Job kind; not JobSets, which the worker may not patch)."""
    ours: list[dict[str, Any]] = []
    unconfirmed: list[dict[str, Any]] = []
    ignored: list[dict[str, Any]] = []
    for obj in objs:
        if not seal.is_sealed(kind, obj):
            ignored.append(obj)
            continue
        state = seal.uid_seal_state(kind, obj) if uid_sealed else "valid"
        this_try = _annotations(obj).get(TRY_NUMBER_LABEL) == str(identity.try_number)
        if state == "valid" or (this_try and state == "missing"):
            ours.append(obj)
        elif state == "missing" and finished_condition(obj) is None:
            unconfirmed.append(obj)
        else:
            ignored.append(obj)
    return SealedObjects(ours, unconfirmed, ignored)


def needs_uid_seal(obj: Mapping[str, Any], seal: IdentitySeal, kind: str, uid_sealed: bool) -> bool:
    """An adopted object of a uid-sealed kind that lacks its uid seal (its worker died before the patch)."""
    return uid_sealed and seal.uid_seal_state(kind, obj) == "missing"


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _metadata(obj).get("annotations") or {}
