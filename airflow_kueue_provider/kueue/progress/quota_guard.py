"""Never outside Kueue's quota: what to do with a Job that Kueue is not managing.

The provider creates every Job suspended, so a Job Kueue never picks up stays without pods. Kueue shows it
manages a Job by creating its Workload. A Job without one is not queued anywhere: after ``workload_timeout``
it is deleted and the task fails with the likely causes. A Job without a Workload that runs pods anyway
(someone unsuspended it, or it was created before Kueue's webhook answered) runs outside every quota and is
deleted at once. Pure policy: the trigger re-reads the objects before it acts on a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from .followed_view import FollowedView

DEFAULT_WORKLOAD_TIMEOUT = 60.0  # seconds Kueue has to create a new Job's Workload (it takes < 1 s normally)

LIKELY_CAUSES = (
    "the namespace is not managed by Kueue (Kueue's managedJobsNamespaceSelector and its webhooks' "
    "namespaceSelector leave out kube-system and kueue-system by default); Kueue's batch/job integration "
    "is not enabled (integrations.frameworks); the Kueue controller is not running; or the queue-name label "
    "was removed. Check `kubectl get workloads -n {ns}` and the Kueue controller's log"
)


@dataclass(frozen=True)
class Unmanaged:
    """A verdict on a Job Kueue does not manage: delete it, and fail the task with ``message``."""

    message: str
    running_outside_quota: bool


def unmanaged_verdict(
    view: FollowedView, seconds_since_submit: float, workload_timeout: float
) -> Unmanaged | None:
    """None while Kueue manages the Job (it has a Workload), it finished, or Kueue still has time."""
    if view.finished_condition is not None or view.workload is not None:
        return None
    running = f"ran {view.active} pod(s)" if not view.suspended and view.active > 0 else None
    where, causes = f"Job {view.namespace}/{view.name}", LIKELY_CAUSES.format(ns=view.namespace)
    return no_workload_verdict(where, causes, running, seconds_since_submit, workload_timeout)


def no_workload_verdict(
    where: str, causes: str, running: str | None, seconds_since_submit: float, workload_timeout: float
) -> Unmanaged | None:
    """The verdict on an unfinished object (``where``: "Job ns/name", "JobSet ns/name") that has no Kueue
    Workload: ``running`` (e.g. "ran 3 pod(s)") when it runs anyway, outside any quota: at once; else once
    Kueue's ``workload_timeout`` is over. ``causes``: the likely reasons, for the message."""
    if running is not None:
        return Unmanaged(
            f"{where} {running} without a Kueue Workload, outside any quota; it was deleted. "
            f"Likely: {causes}",
            running_outside_quota=True,
        )
    if seconds_since_submit >= workload_timeout:
        return Unmanaged(
            f"Kueue did not create a Workload for {where} within workload_timeout={workload_timeout:.0f}s, "
            f"so it is not queued anywhere (no pod ran); it was deleted. Likely: {causes}",
            running_outside_quota=False,
        )
    return None
