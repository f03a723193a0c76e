"""The shards seam: a checkpoint session and its null object both are a ``ShardSession`` (mypy checks the
assignments below; ``isinstance`` checks the members at run time), and the seam is exactly what the
operator template and the kinds call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import airflow_kueue_provider
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
from airflow_kueue_provider.operators.no_checkpointing import NoCheckpointing
from airflow_kueue_provider.operators.shard_session import ShardSession

CALLERS = (
    "operators/kueue_operator.py",
    "operators/indexed_job.py",
    "operators/jobset.py",
    "operators/operator_kind.py",
    "operators/deadline_spill.py",
    "decorators/kueue_task.py",
    "operators/job_submission.py",
)
NARROWED = {"result"}
"""Called on the shards only after narrowing to ``CheckpointSession`` (a ledger's result): not the seam."""


def _seam(shards: ShardSession) -> int:
    """Where a ``ShardSession`` is expected (mypy rejects an argument that lacks a member or types one
    differently)."""
    return shards.shard_count


def test_a_checkpoint_session_and_its_null_object_are_both_shard_sessions() -> None:
    session = CheckpointSession(Checkpointing("blob"), AirflowIdentity("d", "t", "r"), 4)
    null = NoCheckpointing(4)
    both: list[ShardSession] = [session, null]
    assert [_seam(s) for s in both] == [4, 4]
    assert all(isinstance(s, ShardSession) for s in both)
    assert [s.keeps_ledger for s in both] == [True, False]


def test_an_object_short_of_a_member_is_not_a_shard_session() -> None:
    class Partial(NoCheckpointing):
        clean_up_after_success = None  # type: ignore[assignment]

    assert not isinstance(Partial(1), ShardSession)
    assert not isinstance(object(), ShardSession)


def _members() -> set[str]:
    return {name for name in vars(ShardSession) if not name.startswith("_")}


@pytest.mark.parametrize("caller", CALLERS)
def test_what_each_caller_asks_of_its_shards_is_in_the_seam(caller: str) -> None:
    source = (Path(airflow_kueue_provider.__file__).parent / caller).read_text()
    called = set(re.findall(r"\bshards\.(\w+)", source))
    assert called - NARROWED <= _members(), f"{caller} calls what the seam lacks"


def test_every_member_of_the_seam_is_called() -> None:
    root = Path(airflow_kueue_provider.__file__).parent
    called = {m for c in CALLERS for m in re.findall(r"\bshards\.(\w+)", (root / c).read_text())}
    assert _members() == called - NARROWED, "the seam is exactly what the template and the kinds call"
