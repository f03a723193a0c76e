"""The unmanaged grace waits for Kueue's workload_timeout while there is no Workload, and no longer: past
it, the kind's own verdict decides, and a kind that says "managed" is never re-read in a loop."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from airflow_kueue_provider.triggers.unmanaged_grace import UNMANAGED_GRACE_SECONDS, UnmanagedGrace

NO_WORKLOAD: Any = SimpleNamespace(workload=None, finished_condition=None)
ADMITTED: Any = SimpleNamespace(workload=object(), finished_condition=None)


def test_without_a_workload_it_waits_until_the_workload_timeout() -> None:
    grace = UnmanagedGrace(submitted_at=time.time(), workload_timeout=60)
    assert 59 < (grace.wait(NO_WORKLOAD, unmanaged=False) or 0) <= 60.05


def test_past_the_workload_timeout_a_managed_verdict_leaves_nothing_due() -> None:
    grace = UnmanagedGrace(submitted_at=time.time() - 3600, workload_timeout=60)
    assert grace.wait(NO_WORKLOAD, unmanaged=False) is None


def test_an_unmanaged_verdict_must_hold_for_the_grace() -> None:
    grace = UnmanagedGrace(submitted_at=time.time() - 3600, workload_timeout=60)
    assert grace.wait(ADMITTED, unmanaged=False) is None
    assert 0 < (grace.wait(NO_WORKLOAD, unmanaged=True) or 0) <= UNMANAGED_GRACE_SECONDS
