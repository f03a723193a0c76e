"""What a task of any job kind raises after its object failed, timed out or could not run; each kind's
operator module has its own subclass (``KueueJobFailed``, ``KueueJobSetFailed``)."""

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
