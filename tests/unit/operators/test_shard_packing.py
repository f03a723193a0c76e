"""``shards_per_pod`` / ``expected_shard_duration`` on the Job operator: checked when the DAG is parsed, and
the retry plan counts pods of several shards."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.shard_packing import PackingChoice
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator


def _op(**kwargs: Any) -> KueueIndexedJobOperator:
    base = {"task_id": "t", "queue_name": "q", "image": "i", "completions": 1000, "parallelism": 50}
    return KueueIndexedJobOperator(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        (
            {"shards_per_pod": 10},
            "shards_per_pod packs several shards into one pod, which needs checkpointing=",
        ),
        ({"expected_shard_duration": 3}, "expected_shard_duration packs .* needs checkpointing="),
        ({"shards_per_pod": 0, "checkpointing": "blob"}, "shards_per_pod=0: give a whole number >= 1"),
        ({"shards_per_pod": 1001, "checkpointing": "blob"}, "more than the 1000 shards"),
        (
            {"expected_shard_duration": "3s", "checkpointing": "blob"},
            "give a timedelta or a number of seconds",
        ),
        ({"expected_shard_duration": timedelta(0), "checkpointing": "blob"}, "give a positive duration"),
    ],
)
def test_bad_packing_fails_when_the_dag_is_parsed(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(AirflowFailException, match=says) as info:
        _op(**kwargs)
    assert info.value.__cause__ is None, "one message, no chained copy"


def test_the_operator_packs_from_what_it_is_told() -> None:
    assert _op()._packing().per_pod(1000) == 1
    assert _op(checkpointing="blob", shards_per_pod=8)._packing().per_pod(1000) == 8
    chosen = _op(checkpointing="blob", expected_shard_duration=timedelta(seconds=3))._packing()
    assert chosen == PackingChoice(None, 3.0, 50) and chosen.per_pod(1000) == 10


def test_the_retry_plan_says_how_many_pods_run_the_unfinished_shards() -> None:
    attempt = Attempt(1, "job-1", IndexSet.range(0, 300), completed=IndexSet.parse("0-279"), per_pod=10)
    ledger = RunLedger(300, (attempt,))
    assert ledger.retry_plan(10) == (
        "280 of 300 shards done in 1 earlier attempt(s); running the 20 unfinished (280-299) as Job indexes "
        "0-1 (10 shards per pod)"
    )
