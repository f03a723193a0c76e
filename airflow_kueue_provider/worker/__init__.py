"""The SDK a shard's container uses: index → shard, Blob checkpoints, and the SIGTERM flush.

Importable without Airflow (it needs only azure-storage-blob and azure-identity): the container image installs
this package, not Airflow. Entry point: :meth:`Shard.from_env`.
"""

from __future__ import annotations

from .env import ShardEnv, split_checkpoint_url
from .mapping import shard_id_for_index
from .naming import checkpoint_name, checkpoint_seq, done_name
from .shard import EXIT_SIGTERM, MAX_CHECKPOINT_BYTES, JsonStore, Progress, Shard, ShardAlreadyDone

__all__ = [
    "EXIT_SIGTERM",
    "MAX_CHECKPOINT_BYTES",
    "JsonStore",
    "Progress",
    "Shard",
    "ShardAlreadyDone",
    "ShardEnv",
    "checkpoint_name",
    "checkpoint_seq",
    "done_name",
    "shard_id_for_index",
    "split_checkpoint_url",
]
