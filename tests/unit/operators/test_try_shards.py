"""The try's shards: the null object without ``checkpointing=`` (the packing not even asked), a session with
it; ``check=False`` (``execute_complete``) builds the session without checking the Blob configuration."""

from __future__ import annotations

from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession
from airflow_kueue_provider.operators.no_checkpointing import NoCheckpointing
from airflow_kueue_provider.operators.try_shards import open_shards

IDENTITY = AirflowIdentity("d", "t", "r")


def _unpacked() -> PackingChoice:
    raise AssertionError("no session, no packing")


def test_without_checkpointing_the_null_object_and_no_packing() -> None:
    shards = open_shards("t", None, IDENTITY, 4, _unpacked)
    assert isinstance(shards, NoCheckpointing)
    assert shards.shard_count == 4


def test_with_checkpointing_a_session_unchecked_when_asked() -> None:
    shards = open_shards("t", Checkpointing("blob"), IDENTITY, 3, PackingChoice, check=False)
    assert isinstance(shards, CheckpointSession)
    assert shards.shard_count == 3
