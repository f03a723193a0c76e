"""The failures a task of each job kind raises (after its object failed, timed out or could not run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..airflow_compat import AirflowException
from ..kueue.errors import KueueProviderError


class KueueJobFailed(AirflowException, KueueProviderError):
    """The task's Job failed, timed out in the queue, or could not run: ``status``, ``job_name``,
    ``namespace`` and ``failed_indexes`` (an interval string) say which and where. Airflow retries it like
    any task failure (bad input fails earlier, with AirflowFailException, without retries)."""

    def __init__(self, message: str, event: dict[str, Any]) -> None:
        super().__init__(message)
        self.status: str | None = event.get("status")
        self.job_name: str | None = event.get("job_name")
        self.namespace: str | None = event.get("namespace")
        self.failed_indexes: str = str(event.get("failed_indexes") or "")


class KueueJobSetFailed(AirflowException, KueueProviderError):
    """The task's JobSet failed, timed out in the queue, or could not run: ``status``, ``jobset_name``,
    ``namespace`` and ``failed_indexes`` (per child Job, ``"<job>: 3,7"``) say which and where."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.status: str | None = event.get("status")
        self.jobset_name: str | None = event.get("jobset_name")
        self.namespace: str | None = event.get("namespace")
        self.failed_indexes = "; ".join(
            rj["failed_indexes"] for rj in event.get("replicated_jobs") or () if rj.get("failed_indexes")
        )
