"""The end of a checkpointed try names what its Job's indexes ran: with ``shards_per_pod`` an index runs a
pack of shards, so "its 60 indexes ran shards 0-59" of a 6-index Job was wrong."""

from __future__ import annotations

from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.run_figures import shard_summary

RESULT = {"succeeded": 60, "completions": 60, "failed_indexes": ""}


def test_a_packed_job_s_indexes_ran_packs_of_shards() -> None:
    ledger = RunLedger(60).with_attempt(Attempt(1, "try-1", IndexSet.range(0, 60), packing="10"))
    line = shard_summary("ns/try-1 completed all 6 indexes", RESULT, ledger, "try-1")
    assert line.startswith("ns/try-1 completed all 6 indexes (its 6 indexes ran 60 shards, 0-59); ")


def test_one_index_ran_one_shard() -> None:
    ledger = RunLedger(60).with_attempt(Attempt(2, "try-2", IndexSet.parse("7")))
    line = shard_summary("ns/try-2 completed its 1 index", RESULT, ledger, "try-2")
    assert line.startswith("ns/try-2 completed its 1 index (its 1 index ran shard 7); ")


def test_unpacked_indexes_ran_their_shards() -> None:
    ledger = RunLedger(300).with_attempt(Attempt(2, "try-2", IndexSet.parse("7,123")))
    assert "(its 2 indexes ran shards 7,123)" in shard_summary("m", RESULT, ledger, "try-2")
