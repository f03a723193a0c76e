"""``shards_per_pod`` / ``expected_shard_duration`` on the Job operator: checked when the DAG is parsed, and
the retry plan counts pods of several shards."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice, ShardDuration
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.result import JobResult
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
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
        ({"expected_shard_duration": (20, 1), "checkpointing": "blob"}, r"\(shortest, longest\); swap them"),
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
    assert chosen == PackingChoice(None, ShardDuration(3.0, 3.0), 50) and chosen.per_pod(1000) == 10
    skewed = _op(checkpointing="blob", expected_shard_duration=(1, timedelta(seconds=20)))._packing()
    assert skewed.packs(IndexSet.range(0, 1000)).shape == "5x160,4x13,3x16,2x25,1x50"


def test_the_retry_plan_says_how_many_pods_run_the_unfinished_shards() -> None:
    attempt = Attempt(1, "job-1", IndexSet.range(0, 300), completed=IndexSet.parse("0-279"), packing="10")
    ledger = RunLedger(300, (attempt,))
    assert ledger.retry_plan(PackingChoice(explicit=10).packs) == (
        "280 of 300 shards done in 1 earlier attempt(s); running the 20 unfinished (280-299) as Job indexes "
        "0-1 (20 shards as 2 pods of up to 10)"
    )


def test_a_failed_packs_finished_shards_count_as_done_from_their_markers() -> None:
    """8 shards as 2 pods of 4: index 1 (shards 4-7) completed, index 0 failed with shard 2 alone undone."""
    packing = PackingChoice(explicit=4, parallelism=2)
    session = CheckpointSession(Checkpointing("blob"), AirflowIdentity("d", "t", "r"), 8, packing)
    ledger = RunLedger(8, (Attempt(1, "job-1", IndexSet.range(0, 8), packing="4"),))
    end = JobResult("job-1", "ns", None, None, 2, "1", "0", 1, 1, None, None, 0)
    without = session.finished(ledger, "job-1", end, "failed")
    assert (str(without.completed), str(without.failed)) == ("4-7", "0-3")
    done = IndexSet.parse("0,1,3-7")
    with_markers = session.finished(ledger, "job-1", end, "failed", done=done)
    assert (str(with_markers.completed), str(with_markers.failed), str(with_markers.remaining)) == (
        "0,1,3-7",
        "2",
        "2",
    )
    assert RunLedger.from_dict(with_markers.to_dict()) == with_markers, "per_pod survives the Blob round trip"
    assert "per_pod" not in Attempt(1, "j", IndexSet.range(0, 2)).to_dict(), "unpacked ledgers look as before"


def test_a_decreasing_packs_ledger_maps_indexes_to_their_shards_and_keeps_its_shape() -> None:
    """11 shards as packs of 3,3,2,2,1: index 2 (shards 6-7) failed, the rest completed."""
    attempt = Attempt(1, "job-1", IndexSet.range(0, 11), packing="3x2,2x2,1x1")
    ledger = RunLedger(11, (attempt,)).with_job_progress(
        "job-1", IndexSet.parse("0-1,3-4"), IndexSet.parse("2")
    )
    assert (str(ledger.completed), str(ledger.failed)) == ("0-5,8-10", "6,7")
    stored = ledger.to_dict()["attempts"][0]
    assert stored["per_pod"] == "3x2,2x2,1x1", "runs keep the key an older provider reads with int(): loudly"
    assert RunLedger.from_dict(ledger.to_dict()) == ledger
    assert Attempt.from_dict({**stored, "per_pod": 4}).packing == "4", (
        "a ledger of even packs reads as before"
    )
