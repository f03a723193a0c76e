"""A checkpointed task's result over every attempt, in shard ids, and the clean-up after success."""

from __future__ import annotations

from airflow_kueue_provider.hooks.ledger_store import LedgerStore
from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.result import JobResult
from airflow_kueue_provider.operators.attempt_ledger import AttemptLedger
from airflow_kueue_provider.operators.checkpoint_config import Checkpointing
from airflow_kueue_provider.operators.checkpoint_results import CheckpointResults

from .blob_fakes import AccountHook, MemoryBlobs, ShardContainer, done_markers, place


def _results(
    hook: AccountHook | None = None, config: Checkpointing | None = None, blobs: MemoryBlobs | None = None
) -> CheckpointResults:
    where = place(hook, config, shard_count=10, blobs=blobs)
    identity = AirflowIdentity("d", "t", "r", try_number=2)
    return CheckpointResults(where, AttemptLedger(where, identity, PackingChoice()))


def _retry_end(evictions: int = 0) -> JobResult:
    """The retry's Job: its indexes 0-2 ran shards 2,5,8."""
    return JobResult("job-2", "ns", "wl", "cq", 3, "0-2", "", 3, 0, 5.0, 60.0, evictions)


def _two_attempts() -> RunLedger:
    first = Attempt(1, "job-1", IndexSet.range(0, 10), completed=IndexSet.parse("0,1,3,4,6,7,9"), evictions=2)
    retry = Attempt(2, "job-2", IndexSet.parse("2,5,8"), completed=IndexSet.parse("2,5,8"))
    return RunLedger(10, (first, retry))


def test_the_result_is_over_every_attempt_in_shard_ids() -> None:
    out = _results().result(_two_attempts(), _retry_end(evictions=1))
    assert (out["job_name"], out["completions"], out["completed_indexes"], out["succeeded"]) == (
        "job-2",
        10,
        "0-9",
        10,
    )
    assert (out["attempts"], out["retried_shards"], out["evictions"]) == (2, 3, 2)
    assert out["ledger"] == "ckpt/d/r/t/ledger.json"


def test_a_result_with_no_job_of_this_try_says_so() -> None:
    out = _results().result(_two_attempts(), None)
    assert out["job_name"] is None and out["running_seconds"] is None and out["evictions"] == 2


def test_a_result_without_the_ledger_write_is_over_every_attempt_when_the_ledger_still_reads() -> None:
    blobs = MemoryBlobs()
    earlier = _two_attempts()
    started = RunLedger(10, (earlier.attempts[0], Attempt(2, "job-2", IndexSet.parse("2,5,8"))))
    LedgerStore(blobs, "d/r/t").update(lambda _: started)  # type: ignore[arg-type]

    out = _results(blobs=blobs).result_without_ledger_write(None, _retry_end(), "succeeded")

    assert out["completed_indexes"] == "0-9" and out["attempts"] == 2 and out["ledger_written"] is False
    assert RunLedger.from_dict(blobs.read_json("d/r/t/ledger.json")[0] or {}) == started, "nothing written"


def test_the_clean_up_deletes_the_shards_checkpoints_and_their_container_unless_kept() -> None:
    hook = AccountHook(shards=ShardContainer([*done_markers(IndexSet.range(0, 3)), "elsewhere/x"]))
    kept = _results(hook, Checkpointing("blob", "ckpt", keep_after_success=True))
    assert kept.clean_up_after_success() == 0 and hook.calls == []

    assert _results(hook).clean_up_after_success() == 3
    assert hook.shards.names == ["elsewhere/x"]
    assert hook.calls[-1][0] == "delete container", "then the container, if nothing else is in it"
