"""The SDK a shard's container uses: index → shard, Blob checkpoints, and the SIGTERM flush.

Importable without Airflow (it needs only azure-storage-blob and azure-identity): the container image installs
this package, not Airflow. Entry points:
:meth:`Shard.from_env` (one shard per pod), :meth:`Shard.each_from_env` (several, with ``shards_per_pod``).
"""

from __future__ import annotations

from .env import ShardEnv, split_checkpoint_url
from .mapping import shard_id_for_index, shard_ids_for_index
from .naming import checkpoint_name, checkpoint_seq, done_name
from .shard import EXIT_SIGTERM, MAX_CHECKPOINT_BYTES, JsonStore, Progress, Shard, ShardAlreadyDone
from .shard_items import NoShardItem
from .shard_pack import ShardPack, ShardsFailed

__all__ = [
    "EXIT_SIGTERM",
    "MAX_CHECKPOINT_BYTES",
    "JsonStore",
    "NoShardItem",
    "Progress",
    "Shard",
    "ShardAlreadyDone",
    "ShardEnv",
    "ShardPack",
    "ShardsFailed",
    "checkpoint_name",
    "checkpoint_seq",
    "done_name",
    "shard_id_for_index",
    "shard_ids_for_index",
    "split_checkpoint_url",
]
