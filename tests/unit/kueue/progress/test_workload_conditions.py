"""A Workload's conditions are looked up by type, and only a true one counts as set."""

from __future__ import annotations

from airflow_kueue_provider.kueue.progress.workload_conditions import (
    COND_ADMITTED,
    COND_EVICTED,
    conditions_by_type,
    true_condition,
)


def test_conditions_are_keyed_by_type_and_malformed_items_are_skipped() -> None:
    raw = [{"type": "Evicted", "status": "False"}, "garbage", {"status": "True"}, {"type": 3}]
    raw.append({"type": "Admitted", "status": "True", "reason": "Admitted"})
    by_type = conditions_by_type(raw)
    assert set(by_type) == {COND_EVICTED, COND_ADMITTED}
    assert true_condition(by_type, COND_ADMITTED) == raw[-1]
    assert true_condition(by_type, COND_EVICTED) is None  # there, but false
    assert true_condition(by_type, "Finished") is None
    assert conditions_by_type(None) == {}
