"""The run ledger: shards across attempts, and merges that never lose a completed shard."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.checkpoints.checkpoint_retention import task_prefix
from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger, ledger_prefix
from airflow_kueue_provider.kueue.index_set import IndexSet


def S(text: str) -> IndexSet:
    return IndexSet.parse(text)


def test_retry_runs_only_the_remaining_shards_and_the_result_covers_all() -> None:
    ledger = RunLedger(10).with_attempt(Attempt(1, "job-t1", S("0-9")))
    ledger = ledger.with_job_progress("job-t1", S("0-1,3-4,6-7,9"), S("2,5,8"), status="failed")
    assert str(ledger.remaining) == "2,5,8" and str(ledger.failed) == "2,5,8"

    retry = ledger.with_attempt(Attempt(2, "job-t2", ledger.remaining))
    retry = retry.with_job_progress("job-t2", S("0-2"), S(""), status="succeeded")  # Job indexes 0..2

    assert str(retry.completed) == "0-9" and not retry.remaining and not retry.failed
    assert [a.try_number for a in retry.attempts] == [1, 2]
    assert str(retry.attempt("job-t2").completed) == "2,5,8"  # type: ignore[union-attr]


def test_round_trip() -> None:
    ledger = RunLedger(5).with_attempt(Attempt(1, "j", S("0-4"), completed=S("1"), evictions=2))
    assert RunLedger.from_dict(ledger.to_dict()) == ledger


@given(st.lists(st.sets(st.integers(0, 49)), min_size=2, max_size=6))
def test_concurrent_writers_lose_no_completed_shard(progress: list[set[int]]) -> None:
    """Each writer saw part of the progress; merging in any order keeps every completed shard."""
    base = RunLedger(50).with_attempt(Attempt(1, "job", S("0-49")))
    writers = [base.with_job_progress("job", IndexSet.from_indexes(p), IndexSet()) for p in progress]
    merged = writers[0]
    for other in reversed(writers[1:]):
        merged = merged.merge(other)
    assert set(merged.completed) == set().union(*progress)


def test_prefix_keeps_each_part_one_path_segment() -> None:
    assert (
        ledger_prefix("dag", "manual__2026-11-30T02:00:00+00:00", "t")
        == "dag/manual__2026-11-30T02%3A00%3A00%2B00%3A00/t"
    )
    assert ledger_prefix("d", "r/x", "t", 3) == "d/r%2Fx/t/3"
    assert ledger_prefix("d", "..", "t") == "d/%2E%2E/t", "'..' can never move the prefix"
    assert ledger_prefix("d", "r_x", "t") != ledger_prefix("d", "r/x", "t")
    long = ledger_prefix("d", "r" * 500, "t").split("/")[1]
    assert len(long) <= 200 and "~" in long


ID = st.text(min_size=1, max_size=300)


@given(ID, ID, ID, ID, ID, ID)
def test_no_two_task_instances_share_or_escape_a_prefix(
    d1: str, r1: str, t1: str, d2: str, r2: str, t2: str
) -> None:
    a, b = ledger_prefix(d1, r1, t1), ledger_prefix(d2, r2, t2, 4)
    for prefix, segments in ((a, 3), (b, 4)):
        parts = prefix.split("/")
        assert len(parts) == segments and all(p and p not in (".", "..") for p in parts)
        assert task_prefix(f"{prefix}/ledger.json") == prefix
        assert task_prefix(f"{prefix}/shards/0/checkpoint-00000001.json") == prefix
    if (d1, r1, t1) != (d2, r2, t2):
        assert ledger_prefix(d1, r1, t1) != ledger_prefix(d2, r2, t2)
    assert not b.startswith(a + "/") or (d1, r1, t1) == (d2, r2, t2), "one prefix never holds another's"


def test_an_attempts_figures_are_kept_and_old_ledgers_still_read() -> None:
    from airflow_kueue_provider.kueue.figures.attempt_figures import CostModel
    from airflow_kueue_provider.kueue.figures.cost import VmPrice

    figures = CostModel({"cpu": "1"}, VmPrice()).figures("job-a", 2, 1.0, 4.0, spot=True, try_number=2)
    ledger = RunLedger(300).with_attempt(Attempt(2, "job-a", IndexSet.parse("7,123")))
    ledger = ledger.with_job_progress("job-a", IndexSet.parse("0-1"), IndexSet(), figures=figures)
    again = RunLedger.from_dict(ledger.to_dict())
    assert again.attempt("job-a").figures == figures  # type: ignore[union-attr]
    old = ledger.to_dict()
    del old["attempts"][0]["figures"]
    assert RunLedger.from_dict(old).attempt("job-a").figures is None  # type: ignore[union-attr]


def test_the_retry_plan_speaks_in_shard_ids() -> None:
    ledger = RunLedger(300).with_attempt(Attempt(1, "job-a", IndexSet.range(0, 300)))
    ledger = ledger.with_job_progress("job-a", IndexSet.range(0, 300) - IndexSet.parse("7,123"), IndexSet())
    assert ledger.retry_plan() == (
        "298 of 300 shards done in 1 earlier attempt(s); running the 2 unfinished (7,123) as Job indexes 0-1"
    )


def test_figures_recorded_by_a_later_try_keep_the_try_that_made_the_job() -> None:
    from airflow_kueue_provider.kueue.figures.attempt_figures import CostModel
    from airflow_kueue_provider.kueue.figures.cost import VmPrice

    ledger = RunLedger(4).with_attempt(Attempt(1, "job-a", IndexSet.range(0, 4)))
    figures = CostModel(None, VmPrice()).figures("job-a", 4, 0.0, 2.0, spot=False, try_number=2)
    ledger = ledger.with_job_progress("job-a", IndexSet.range(0, 4), IndexSet(), figures=figures)
    assert ledger.attempt("job-a").figures.try_number == 1  # type: ignore[union-attr]


def test_one_mapping_to_an_attempts_status() -> None:
    from airflow_kueue_provider.kueue.checkpoints.ledger import attempt_status

    assert [attempt_status(o) for o in ("success", "failed", "timeout", "error")] == [
        "succeeded",
        "failed",
        "failed",
        "failed",
    ]
    assert [attempt_status(finished_condition=c) for c in ("Complete", "Failed", None)] == [
        "succeeded",
        "failed",
        "running",
    ]


SALT, OTHER = "0123456789abcdef" * 2, "f" * 32


def test_the_container_salt_is_kept_by_round_trips_and_merges_and_old_ledgers_have_none() -> None:
    salted = RunLedger(4, container_salt=SALT).with_attempt(Attempt(1, "j", S("0-3")))
    assert salted.to_dict()["container_salt"] == SALT and RunLedger.from_dict(salted.to_dict()) == salted
    progressed = salted.with_job_progress("j", S("0"), S(""))
    assert progressed.container_salt == SALT, "an update of the ledger keeps it"
    # Two first tries raced: the ETag winner's ledger is current; the loser's change merges into it.
    assert salted.merge(RunLedger(4, container_salt=OTHER)).container_salt == SALT, "the first stays"
    assert RunLedger(4).merge(salted).container_salt == SALT, "an empty one takes the other's"
    old = {"version": 1, "shard_count": 4, "completed": "", "attempts": []}  # written before salts
    assert RunLedger.from_dict(old).container_salt is None
    assert "container_salt" not in RunLedger(4).to_dict(), "unsalted ledgers look as before"
    with pytest.raises(ValueError, match="container_salt='bad' is not 32 lowercase hex"):
        RunLedger.from_dict({**old, "container_salt": "bad"})
