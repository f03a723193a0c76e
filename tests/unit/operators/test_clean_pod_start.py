"""The pod cost a clean attempt teaches the shard history (``clean_pod_start``)."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt
from airflow_kueue_provider.kueue.figures.attempt_figures import AttemptFigures
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.shard_history_step import clean_pod_start


def _attempt(**changes: object) -> Attempt:
    figures = AttemptFigures("j", pods=2, queued_seconds=0.0, running_seconds=22.0, spot=True, cost_usd=0.0)
    base: dict[str, object] = {
        "try_number": 1,
        "job_name": "j",
        "shards": IndexSet.range(0, 4),
        "completed": IndexSet.range(0, 4),
        "status": "succeeded",
        "figures": figures,
    }
    return Attempt(**{**base, **changes})  # type: ignore[arg-type]


def test_a_clean_attempt_teaches_the_pod_cost_and_a_disrupted_one_does_not() -> None:
    durations = {0: 5.0, 1: 5.0, 2: 5.0, 3: 5.0}
    # 4 one-shard pods on 2 slots: 2 x (cost + 5) = 22 s -> 6 s a pod
    assert clean_pod_start(_attempt(), durations) == pytest.approx(6.0, abs=0.1)
    assert clean_pod_start(_attempt(evictions=1), durations) is None
    assert clean_pod_start(_attempt(status="failed"), durations) is None
    assert clean_pod_start(_attempt(completed=IndexSet.range(0, 3)), durations) is None
    assert clean_pod_start(_attempt(), {0: 5.0, 1: 5.0, 2: 5.0}) is None  # a length unknown
