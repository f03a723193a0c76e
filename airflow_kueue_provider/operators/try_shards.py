"""The try's shards for the operator template: a checkpoint session, or its null object without
``checkpointing=``; checked for a bad Blob configuration or pod policy before anything is submitted."""

from __future__ import annotations

from collections.abc import Callable

from ..airflow_compat import AirflowFailException
from ..hooks.blob_store import BlobConfigError
from ..kueue.checkpoints.packing_choice import PackingChoice
from ..kueue.identity.airflow_identity import AirflowIdentity
from .checkpointing import Checkpointing, CheckpointSession
from .no_checkpointing import NoCheckpointing
from .operator_kind import Shards
from .settings import configured_pod_policy


def open_shards(
    task_id: str,
    config: Checkpointing | None,
    identity: AirflowIdentity,
    shard_count: int,
    packing: Callable[[], PackingChoice],
    check: bool = True,
) -> Shards:
    """The try's checkpoint session (or its null object); ``check`` fails fast on bad Blob configuration.
    ``packing`` is called only when there is a session to pack shards for."""
    if config is None:
        return NoCheckpointing(shard_count)
    session = CheckpointSession(config, identity, shard_count, packing())
    if not check:
        return session
    if problem := config.pod_policy_problem(configured_pod_policy()):
        raise AirflowFailException(f"{task_id}: checkpointing: {problem}")
    try:
        session.check()
    except BlobConfigError as exc:
        raise AirflowFailException(f"{task_id}: checkpointing: {exc}") from None
    return session
