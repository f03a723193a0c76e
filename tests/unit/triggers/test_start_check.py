"""The pacing of stuck-pod reads: at start_timeout after admission, then once per recheck interval."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.triggers import start_check
from airflow_kueue_provider.triggers.start_check import START_RECHECK_SECONDS, StartCheckPacing


def test_a_look_is_due_at_start_timeout_then_once_per_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(start_check.time, "monotonic", lambda: clock[0])
    pacing = StartCheckPacing(start_timeout=600)
    assert pacing.due_in(590.0, overdue=False) == pytest.approx(10.0)
    assert pacing.due_in(600.0, overdue=True) is None  # look now
    clock[0] += 5
    assert pacing.due_in(605.0, overdue=True) == pytest.approx(START_RECHECK_SECONDS - 5)
    clock[0] += START_RECHECK_SECONDS
    assert pacing.due_in(635.0, overdue=True) is None  # the recheck
