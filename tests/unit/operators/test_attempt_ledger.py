"""A try's side of the run ledger: what is left, each attempt's start and end, the done markers."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.result import JobResult
from airflow_kueue_provider.operators.attempt_ledger import AttemptLedger
from airflow_kueue_provider.storage.blob_errors import BlobUnavailable

from .blob_fakes import AccountHook, ShardContainer, done_markers, place


def _ledger(
    shard_count: int = 6,
    packing: PackingChoice | None = None,
    hook: AccountHook | None = None,
    try_number: int = 1,
) -> AttemptLedger:
    identity = AirflowIdentity("d", "t", "r", try_number=try_number)
    return AttemptLedger(place(hook, shard_count=shard_count), identity, packing or PackingChoice())


def _end(job_name: str, completed: str, failed: str) -> JobResult:
    return JobResult(job_name, "ns", None, None, 2, completed, failed, 1, 1, None, None, 0)


def test_a_retry_runs_what_the_jobs_report_unfinished_even_when_the_end_was_never_written() -> None:
    attempts = _ledger()
    assert attempts.remaining([])[0] == IndexSet.range(0, 6), "a first try runs every shard"
    attempts.record_attempt("job-1", ShardPacks(IndexSet.range(0, 6)))
    job: dict[str, Any] = {
        "metadata": {"name": "job-1"},
        "status": {"completedIndexes": "0-3", "failedIndexes": "5"},
    }
    stranger = {"metadata": {"name": "not-ours"}, "status": {"completedIndexes": "4"}}

    left, ledger = attempts.remaining([job, stranger])

    assert str(left) == "4,5" and ledger is not None
    assert (str(ledger.completed), str(ledger.failed)) == ("0-3", "5")
    assert [a.job_name for a in ledger.attempts] == ["job-1"], "a Job the ledger never recorded adds nothing"


def test_a_spilled_job_whose_submission_was_never_recorded_is_recorded_from_its_env() -> None:
    attempts = _ledger(try_number=2)
    env = [{"name": "AIRFLOW_KUEUE_SHARDS", "value": "2,4"}]
    job = {
        "metadata": {"name": "job-2"},
        "spec": {"template": {"spec": {"containers": [{"name": "main", "env": env}]}}},
        "status": {"completedIndexes": "0"},
    }
    ledger = attempts.record_spilled(job)
    (attempt,) = ledger.attempts
    assert (attempt.job_name, attempt.try_number, str(attempt.shards)) == ("job-2", 2, "2,4")
    assert attempt.status == "spilled" and str(ledger.remaining) == "0,1,3-5", "shard 2 (index 0) is done"


def test_a_packed_attempts_failed_index_counts_its_shards_with_done_markers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """6 shards as 2 pods of 3: index 0 (shards 0-2) failed after shards 0 and 1 wrote their done markers."""
    hook = AccountHook(shards=ShardContainer(done_markers(IndexSet.parse("0,1,3-5"))))
    attempts = _ledger(packing=PackingChoice(explicit=3), hook=hook)
    attempts.record_attempt("job-1", attempts.packing.packs(IndexSet.range(0, 6)))

    ledger = attempts.record_end("job-1", _end("job-1", "1", "0"), "failed")

    assert str(ledger.remaining) == "2", "only the shard without a marker runs again"
    assert attempts.done_shards() == IndexSet.parse("0,1,3-5")

    hook.shards.error = BlobUnavailable("away")
    with caplog.at_level(logging.WARNING):
        again = _ledger(packing=PackingChoice(explicit=3), hook=hook)
        again.record_attempt("job-1", again.packing.packs(IndexSet.range(0, 6)))
        ledger = again.record_end("job-1", _end("job-1", "1", "0"), "failed")
    assert str(ledger.remaining) == "0-2", "no listing: the failed pack runs again (done shards exit at once)"
    assert "could not list the done shards of job-1" in caplog.text


def test_an_unpacked_attempt_ends_without_listing_the_markers() -> None:
    hook = AccountHook()
    attempts = _ledger(hook=hook)
    attempts.record_attempt("job-1", ShardPacks(IndexSet.range(0, 2)))
    attempts.record_end("job-1", _end("job-1", "1", "0"), "failed")
    assert not [c for c in hook.calls if c[0] == "open"], "an index is its one shard: nothing to list"


def test_an_attempt_the_ledger_lost_is_rebuilt_from_its_job_or_as_a_first_try() -> None:
    attempts = _ledger()
    job = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "m", "env": [{"name": "AIRFLOW_KUEUE_SHARDS", "value": "3-5"}]}]
                }
            }
        }
    }
    from_job = attempts.as_if_recorded(None, job, "job-2")
    assert [(a.job_name, str(a.shards)) for a in from_job.attempts] == [("job-2", "3-5")]
    gone = attempts.as_if_recorded(None, None, "job-2")
    assert str(gone.attempts[0].shards) == "0-5"
    assert attempts.as_if_recorded(from_job, None, "job-2") is from_job, "a ledger that knows it is kept"


def test_the_trigger_gets_where_the_ledger_is() -> None:
    assert _ledger().trigger_ledger() == {
        "conn_id": "blob",
        "container": "ckpt",
        "prefix": "d/r/t",
        "shard_count": 6,
    }
