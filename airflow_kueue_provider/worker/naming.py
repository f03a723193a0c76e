"""Blob names of a shard: ``<prefix>/shards/<shard_id>/checkpoint-<seq:08d>.json`` and ``.../done.json``."""

from __future__ import annotations

import re
from collections.abc import Iterable

_CHECKPOINT = re.compile(r"checkpoint-([0-9]{8,})\.json")


def shard_folder(prefix: str, shard_id: int) -> str:
    """``<prefix>/shards/<shard_id>/`` (with a trailing slash, so shard 1 never lists shard 10's blobs)."""
    if shard_id < 0:
        raise ValueError(f"shard id {shard_id} is negative")
    clean = prefix.strip("/")
    if clean and any(part in ("", ".", "..") for part in clean.split("/")):
        raise ValueError(f"checkpoint prefix {prefix!r} has an empty, '.' or '..' path segment")
    return f"{clean}/shards/{shard_id}/" if clean else f"shards/{shard_id}/"


def checkpoint_name(prefix: str, shard_id: int, seq: int) -> str:
    if seq < 1:
        raise ValueError(f"checkpoint sequence numbers start at 1, got {seq}")
    return f"{shard_folder(prefix, shard_id)}checkpoint-{seq:08d}.json"


def done_name(prefix: str, shard_id: int) -> str:
    return f"{shard_folder(prefix, shard_id)}done.json"


def checkpoint_seq(name: str) -> int | None:
    """The sequence number in a checkpoint blob name, or None for any other blob."""
    match = _CHECKPOINT.fullmatch(name.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def stale_seqs(seqs: Iterable[int], keep: int) -> list[int]:
    """The sequence numbers to delete so only the newest ``keep`` checkpoints remain (ascending)."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    ordered = sorted(set(seqs))
    return ordered[: max(0, len(ordered) - keep)]
