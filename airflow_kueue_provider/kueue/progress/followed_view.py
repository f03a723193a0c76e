"""What the shared trigger loop reads of any job kind's view (docs/design.md, "Job kinds").

``JobView`` (a batch/v1 Job) and ``JobSetView`` (a JobSet) both satisfy ``FollowedView``; a new kind's view
does too. The two rules every kind shares, whether it is admitted now and whether it ever was, live here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .workload_state import WorkloadPhase, WorkloadState

_ADMITTED = (WorkloadPhase.Admitted, WorkloadPhase.Running, WorkloadPhase.Succeeded, WorkloadPhase.Failed)


class FollowedView(Protocol):
    """One moment of a queued object (Job, JobSet, ...) and its Workload."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def workload(self) -> WorkloadState | None: ...
    @property
    def suspended(self) -> bool: ...
    @property
    def admitted(self) -> bool: ...
    @property
    def started(self) -> bool:
        """Ever admitted (``ever_admitted``): a requeue after an eviction is not "never admitted"."""

    @property
    def finished_condition(self) -> Mapping[str, Any] | None: ...
    @property
    def completions(self) -> int: ...
    @property
    def done(self) -> int:
        """Indexes that finished, succeeded or failed (what the finish ETA counts)."""

    @property
    def active(self) -> int: ...


def is_admitted(workload: WorkloadState | None) -> bool:
    """Kueue admits the object now (or did, and it finished)."""
    return workload is not None and workload.phase in _ADMITTED


def ever_admitted(workload: WorkloadState | None, *, ran: bool) -> bool:
    """The object was admitted at some point, read from the objects (a trigger recreated after a triggerer
    restart knows it too). ``ran``: the object's own evidence (a start time, pods, finished indexes); Kueue's:
    an admission time, evictions, or a phase past the queue. The same rule for every kind: a requeue after
    an eviction, or a ramp's next slice waiting for quota, is not "never admitted" (``queue_timeout``)."""
    if ran:
        return True
    if workload is None:
        return False
    return bool(
        workload.admitted_at
        or workload.eviction_count
        or workload.phase not in (WorkloadPhase.Queued, WorkloadPhase.QuotaReserved)
    )
