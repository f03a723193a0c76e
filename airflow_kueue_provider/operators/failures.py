"""The failures a task of each job kind raises (after its object failed, timed out or could not run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..airflow_compat import AirflowException
from ..kueue.errors import KueueProviderError


class KueueTaskFailed(AirflowException, KueueProviderError):
    """The task's object failed, timed out in the queue, or could not run: ``status``, ``namespace`` and
    ``failed_indexes`` say which and where (a kind adds its name key). Airflow retries it like any task
    failure (bad input fails earlier, with AirflowFailException, without retries)."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.status: str | None = event.get("status")
        self.namespace: str | None = event.get("namespace")
        self.failed_indexes: str = self._failed_indexes(event)

    @staticmethod
    def _failed_indexes(event: Mapping[str, Any]) -> str:
        return str(event.get("failed_indexes") or "")


class KueueJobFailed(KueueTaskFailed):
    """The task's Job failed: ``job_name``; ``failed_indexes`` is an interval string."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message, event)
        self.job_name: str | None = event.get("job_name")


class KueueJobSetFailed(KueueTaskFailed):
    """The task's JobSet failed: ``jobset_name``; ``failed_indexes`` per child Job (``"<job>: 3,7"``)."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message, event)
        self.jobset_name: str | None = event.get("jobset_name")

    @staticmethod
    def _failed_indexes(event: Mapping[str, Any]) -> str:
        return "; ".join(
            rj["failed_indexes"] for rj in event.get("replicated_jobs") or () if rj.get("failed_indexes")
        )
