"""Blob names of a shard: ``<prefix>/shards/<shard_id>/checkpoint-<seq:08d>.json`` and ``.../done.json``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from ..kueue.checkpoints.shard_blob_names import done_name, shard_folder

__all__ = ["checkpoint_name", "checkpoint_seq", "done_name", "rank", "shard_folder", "stale_seqs"]

_CHECKPOINT = re.compile(r"checkpoint-([0-9]{8,})\.json")


def checkpoint_name(prefix: str, shard_id: int, seq: int) -> str:
    if seq < 1:
        raise ValueError(f"checkpoint sequence numbers start at 1, got {seq}")
    return f"{shard_folder(prefix, shard_id)}checkpoint-{seq:08d}.json"


def checkpoint_seq(name: str) -> int | None:
    """The sequence number in a checkpoint blob name, or None for any other blob."""
    match = _CHECKPOINT.fullmatch(name.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def rank(progress: float | None, seq: int) -> tuple[bool, float, int]:
    """How checkpoints compare: by progress, then sequence number; one without progress (written before
    progress existed, or by a shard that never gives one) ranks below every one with it."""
    return (False, 0, seq) if progress is None else (True, progress, seq)


def stale_seqs(seqs: Iterable[int], keep: int, rank: Callable[[int], Any] | None = None) -> list[int]:
    """The sequence numbers to delete so only the ``keep`` best checkpoints remain (ascending).

    Best: the highest ``rank(seq)`` (ties: the higher seq); without ``rank``, the newest. With
    ``rank=lambda s: naming.rank(progress[s], s)`` the most progressed checkpoint is always kept.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    best = sorted(set(seqs), key=lambda s: (s if rank is None else rank(s), s), reverse=True)
    return sorted(best[keep:])
