"""The shared watch's cache of one namespace: the latest Jobs, Workloads and JobSets, and who follows them.

LISTs replace a kind whole (:meth:`NamespaceCache._replace`), watch events change one object
(``_apply_*``); either wakes only the followers whose Job or JobSet (or its Workload) changed, and those
of ``ANY_JOB``. Objects are kept slim (:func:`slim`): a triggerer may follow 1,000 Jobs, and a tenant may
write 256 KiB of annotations on each of its Jobs. What one namespace makes the cache hold is capped
(``caps``): past a cap, the change raises ``NamespaceOverCap`` and the hub gives up on that namespace.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..kueue.cached_metadata import slim_metadata
from ..kueue.jobset import workload_owner_uid
from ..kueue.names import JOB_UID_LABEL, JOBSET_NAME_LABEL
from .caps import HubCaps, json_size
from .snapshots import JobSetSnapshot, JobSnapshot

ANY_JOB = ""
"""The follower key of one that wakes on a change of any Job or Workload of the namespace (no Job is named
""): the UI's queue page, which redraws when a Job of the namespace is admitted, evicted or finishes."""
JOBSET_KEY_PREFIX = "jobset/"
"""Follower keys of JobSets: ``jobset/<name>`` (a Job name never has a ``/``)."""


def jobset_key(name: str) -> str:
    return JOBSET_KEY_PREFIX + name


@dataclass(eq=False)
class _Follower:
    job_name: str
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class NamespaceCache:
    """The objects of one namespace as last listed or watched, and the followers to wake when one changes
    (the list+watch loop that feeds it is ``NamespaceWatch``)."""

    def __init__(self, caps: HubCaps | None = None) -> None:
        self.namespace = ""
        self.caps = caps or HubCaps()
        self._sizes: dict[str, dict[str, int]] = {"jobs": {}, "workloads": {}, "jobsets": {}}
        self.retained_bytes = 0  # the slimmed objects' JSON size, all kinds (``caps``)
        self.jobs: dict[str, dict[str, Any]] = {}
        self.workloads: dict[str, dict[str, Any]] = {}  # by the job-uid label
        self._names_by_uid: dict[str, str] = {}
        self.jobsets: dict[str, dict[str, Any]] = {}  # only once a JobSet follower joined (watch_jobsets)
        self._jobset_names_by_uid: dict[str, str] = {}
        self.followers: dict[str, set[_Follower]] = {}

    def _clear(self) -> None:
        """Drop every object (a hub that gave up must not keep a flood)."""
        self.jobs, self.workloads, self.jobsets = {}, {}, {}
        self._names_by_uid, self._jobset_names_by_uid = {}, {}
        self._sizes = {kind: {} for kind in self._sizes}
        self.retained_bytes = 0

    def _count(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        """Account ``obj`` (None: gone) as ``kind``'s ``key`` and check the caps (raises NamespaceOverCap)."""
        sizes = self._sizes[kind]
        self.retained_bytes -= sizes.pop(key, 0)
        if obj is not None:
            sizes[key] = json_size(obj)
            self.retained_bytes += sizes[key]
            self.caps.check(self.namespace, kind, len(sizes), self.retained_bytes)

    def _unfollow(self, follower: _Follower) -> None:
        group = self.followers.get(follower.job_name, set())
        group.discard(follower)
        if not group:
            self.followers.pop(follower.job_name, None)

    def snapshot(self, job_name: str) -> JobSnapshot:
        """The Job and its Workload -- for a JobSet's Job, the JobSet's Workload (Kueue admits it whole)."""
        job = self.jobs.get(job_name)
        uid = workload_owner_uid(job) if job else None
        return JobSnapshot(job, self.workloads.get(uid) if uid else None)

    def jobset_snapshot(self, name: str) -> JobSetSnapshot:
        jobset = self.jobsets.get(name)
        uid = (jobset or {}).get("metadata", {}).get("uid")
        children = tuple(j for j in self.jobs.values() if _jobset_of(j) == name)
        return JobSetSnapshot(jobset, children, self.workloads.get(uid) if uid else None)

    def _wake(self, job_name: str | None = None) -> None:
        if job_name is None:
            groups = list(self.followers.values())
        else:
            groups = [self.followers.get(job_name, set()), self.followers.get(ANY_JOB, set())]
        for group in groups:
            for follower in group:
                follower.changed.set()

    def _replace(self, kind: str, items: list[dict[str, Any]]) -> set[str]:
        """Take a LIST as the cache; returns the names of the Jobs whose object of this kind differs from
        what the cache held (changes the watch had not delivered, when the cache was in sync)."""
        before = {"jobs": self.jobs, "workloads": self.workloads, "jobsets": self.jobsets}[kind]
        known = {key: o["metadata"].get("resourceVersion") for key, o in before.items()}
        self.caps.check(self.namespace, kind, len(items), 0)  # before slimming a flood
        items = [slim(item) for item in items]
        if kind == "jobsets":
            self.jobsets = {js["metadata"]["name"]: js for js in items}
            self._jobset_names_by_uid = {js["metadata"]["uid"]: name for name, js in self.jobsets.items()}
            after = self.jobsets
        elif kind == "jobs":
            self.jobs = {j["metadata"]["name"]: j for j in items}
            self._names_by_uid = {j["metadata"]["uid"]: name for name, j in self.jobs.items()}
            after = self.jobs
        else:
            self.workloads = {}
            for workload in items:
                uid = _job_uid(workload)
                if uid and _is_current_slice(workload, self.workloads.get(uid)):
                    self.workloads[uid] = workload
            after = self.workloads
        self.retained_bytes -= sum(self._sizes[kind].values())
        self._sizes[kind] = sizes = {key: json_size(o) for key, o in after.items()}
        self.retained_bytes += sum(sizes.values())
        self.caps.check(self.namespace, kind, len(sizes), self.retained_bytes)
        now = {key: o["metadata"].get("resourceVersion") for key, o in after.items()}
        keys = {key for key, rv in now.items() if known.get(key) != rv} | (set(known) - set(now))
        if kind == "jobsets":
            return {jobset_key(name) for name in keys}
        if kind == "jobs":  # by name; a namesake that replaced a Job has a new resourceVersion too
            owners = {_jobset_of(o) for name in keys for o in (before.get(name), after.get(name)) if o}
            return keys | {jobset_key(owner) for owner in owners if owner}
        return {self._names_by_uid[uid] for uid in keys if uid in self._names_by_uid} | {
            jobset_key(self._jobset_names_by_uid[uid]) for uid in keys if uid in self._jobset_names_by_uid
        }

    def _apply_job(self, event_type: str, job: dict[str, Any]) -> None:
        job = slim(job)
        name = job["metadata"]["name"]
        if event_type == "DELETED":
            self.jobs.pop(name, None)
            self._names_by_uid.pop(job["metadata"]["uid"], None)
        else:
            self.jobs[name] = job
            self._names_by_uid[job["metadata"]["uid"]] = name
        self._count("jobs", name, self.jobs.get(name))
        self._wake(name)
        if owner := _jobset_of(job):
            self._wake(jobset_key(owner))

    def _apply_jobset(self, event_type: str, jobset: dict[str, Any]) -> None:
        jobset = slim(jobset)
        name = jobset["metadata"]["name"]
        if event_type == "DELETED":
            self.jobsets.pop(name, None)
            self._jobset_names_by_uid.pop(jobset["metadata"]["uid"], None)
        else:
            self.jobsets[name] = jobset
            self._jobset_names_by_uid[jobset["metadata"]["uid"]] = name
        self._count("jobsets", name, self.jobsets.get(name))
        self._wake(jobset_key(name))

    def _apply_workload(self, event_type: str, workload: dict[str, Any]) -> None:
        workload = slim(workload)
        uid = _job_uid(workload)
        if not uid:
            return
        if event_type == "DELETED":
            if self.workloads.get(uid, {}).get("metadata", {}).get("uid") == workload["metadata"].get("uid"):
                self.workloads.pop(uid, None)
        elif _is_current_slice(workload, self.workloads.get(uid)):
            self.workloads[uid] = workload
        self._count("workloads", uid, self.workloads.get(uid))
        if name := self._names_by_uid.get(uid):
            self._wake(name)
        if name := self._jobset_names_by_uid.get(uid):
            self._wake(jobset_key(name))


def _jobset_of(job: dict[str, Any]) -> str | None:
    """The JobSet a Job belongs to (the JobSet controller's label), if any."""
    owner = (job.get("metadata", {}).get("labels") or {}).get(JOBSET_NAME_LABEL)
    return str(owner) if owner else None


def _job_uid(workload: dict[str, Any]) -> str | None:
    uid = workload.get("metadata", {}).get("labels", {}).get(JOB_UID_LABEL)
    return str(uid) if uid else None


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what no follower reads: metadata but for the fields, labels and annotations some
    follower reads, each value bounded (``kueue.cached_metadata``), and the pod template(s) (a Job's
    ``spec.template``, a Workload's ``spec.podSets[].template``). A triggerer following 1,000 Jobs would
    otherwise keep them all, and its garbage collector would walk them, stalling the event loop."""
    obj["metadata"] = slim_metadata(obj.get("metadata") or {})
    spec = obj.get("spec") or {}
    spec.pop("template", None)
    for replicated in spec.get("replicatedJobs") or []:  # a JobSet's templates: its Jobs' specs
        if isinstance(replicated, dict):
            replicated.pop("template", None)
    for pod_set in spec.get("podSets") or []:
        if isinstance(pod_set, dict):
            pod_set.pop("template", None)
    return obj


def _is_current_slice(workload: dict[str, Any], known: dict[str, Any] | None) -> bool:
    """An elastic Job (parallelism ramp) has one Workload per slice; the newest one is the Job's current one,
    so a late update of a replaced slice must not hide it."""
    if known is None or known["metadata"].get("uid") == workload["metadata"].get("uid"):
        return True
    return str(workload["metadata"].get("creationTimestamp", "")) >= str(
        known["metadata"].get("creationTimestamp", "")
    )
