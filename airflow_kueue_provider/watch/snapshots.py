"""What a follower of the shared watch sees: a Job (or a JobSet, with its Jobs) and its Workload at once.

The hub builds them from its cache (``NamespaceCache.snapshot``); :func:`read_snapshot` and
:func:`read_jobset_snapshot` read the same from the apiserver now, for a decision a lagging cache must not
make.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..hooks.kueue_async_hook import AsyncKueueHook


@dataclass(frozen=True)
class JobSnapshot:
    job: dict[str, Any] | None
    workload: dict[str, Any] | None

    @property
    def obj(self) -> dict[str, Any] | None:
        """The followed object, whatever the kind (the trigger loop reads this)."""
        return self.job


@dataclass(frozen=True)
class JobSetSnapshot:
    jobset: dict[str, Any] | None
    jobs: tuple[dict[str, Any], ...]
    """Its child Jobs (the JobSet controller's ``jobset.sigs.k8s.io/jobset-name`` label)."""
    workload: dict[str, Any] | None

    @property
    def obj(self) -> dict[str, Any] | None:
        return self.jobset


async def read_snapshot(hook: AsyncKueueHook, namespace: str, job_name: str) -> JobSnapshot:
    job = await hook.get_job(namespace, job_name)
    if job is None:
        return JobSnapshot(None, None)
    return JobSnapshot(job, await hook.workload_for_job(namespace, job["metadata"]["uid"]))


async def read_jobset_snapshot(hook: AsyncKueueHook, namespace: str, name: str) -> JobSetSnapshot:
    jobset = await hook.get_jobset(namespace, name)
    if jobset is None:
        return JobSetSnapshot(None, (), None)
    children = tuple(await hook.jobset_children(namespace, name))
    return JobSetSnapshot(jobset, children, await hook.workload_for_job(namespace, jobset["metadata"]["uid"]))
