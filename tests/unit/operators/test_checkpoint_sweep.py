"""The checkpoint sweep's parse-time rules: a floor on ``older_than``, and listing only unless told."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.operators.checkpoint_sweep import KueueCheckpointSweepOperator


def test_the_sweep_lists_only_by_default() -> None:
    assert KueueCheckpointSweepOperator(task_id="sweep").list_only is True


def test_older_than_below_the_floor_fails_when_the_dag_is_parsed() -> None:
    with pytest.raises(AirflowFailException, match=r"sweep: older_than=.* below the sweep's floor of 1 day"):
        KueueCheckpointSweepOperator(task_id="sweep", older_than=timedelta(hours=1))
