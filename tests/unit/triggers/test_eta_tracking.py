"""A trigger's queue ETA (triggers/eta_tracking.py): positions from a shared list are recorded at the moment
that list was read, so a list served again to a later asker does not bend the admission pace."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from airflow_kueue_provider.triggers import eta_tracking
from airflow_kueue_provider.triggers.eta_tracking import QueueAndFinishEta


class SharedList:
    """A Following whose LocalQueue list was read at ``read_at`` and says ``position``."""

    def __init__(self, position: tuple[int, int], read_at: float) -> None:
        self.position, self.read_at = position, read_at

    async def pending_position(self, local_queue: str, workload: str) -> tuple[int, int]:
        return self.position

    def position_read_at(self, local_queue: str) -> float:
        return self.read_at


def test_the_admission_pace_is_measured_between_the_lists_read_times(monkeypatch: Any) -> None:
    monkeypatch.setattr(eta_tracking, "POSITION_FIRST_AFTER", 0.0)
    monkeypatch.setattr(eta_tracking, "POSITION_FIRST_REFRESH", 0.0)
    queued = SimpleNamespace(admitted=False, workload=SimpleNamespace(workload_name="wl"))
    eta = QueueAndFinishEta()
    asyncio.run(eta.look(SharedList((9, 9), read_at=1_000.0), "lq", queued))  # type: ignore[arg-type]
    asyncio.run(eta.look(SharedList((5, 5), read_at=1_040.0), "lq", queued))  # type: ignore[arg-type]
    estimate, _ = eta.estimate(queued)  # type: ignore[arg-type]
    assert estimate is not None  # 4 places in 40 s: 6 ahead of it (itself included) take 60 s
    assert abs(estimate.at.timestamp() - 1_100.0) < 1e-6
