"""Never stuck after admission: pods that cannot start are a failure, not a wait.

Kueue admits by quota, not by whether the pods can run: an image that never pulls, a container config that
cannot be built, pods the Job controller cannot create, or pods no node will take hold the Job's quota for
ever. Once a Job has been admitted for ``start_timeout`` with no pod ready and no index finished, the trigger
reads its pods (and, if there are none, its Events) and fails the task when one of them names a reason that
does not heal by waiting. Pure rules; the trigger does the reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_START_TIMEOUT = 600.0  # seconds from admission; long enough for a Spot node pool to scale up
# Waiting reasons of a container that a retry by the kubelet does not fix.
STUCK_WAITING_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def stuck_reason(pods: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the Job's pods cannot start, from the pods (or the Job's Events when there is no pod); None when
    nothing says they never will (e.g. still pulling a big image)."""
    for pod in pods:
        name = pod.get("metadata", {}).get("name", "?")
        status = pod.get("status") or {}
        statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
        for container in statuses:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in STUCK_WAITING_REASONS:
                return f"pod {name}: {waiting['reason']}: {waiting.get('message') or 'no message'}"
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return f"pod {name}: Unschedulable: {cond.get('message') or 'no node fits it'}"
    if not pods:
        for event in reversed(events):
            if event.get("reason") == "FailedCreate":
                return f"the Job controller could not create pods: FailedCreate: {event.get('message')}"
    return None
