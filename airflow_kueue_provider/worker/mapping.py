"""Completion index → shard id(s): the pure mapping every pod of an IndexedJob applies to itself."""

from __future__ import annotations

from airflow_kueue_provider.kueue.checkpoints.shard_packing import InvalidPacking, ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet


def shard_id_for_index(index: int, shards: str | None) -> int:
    """The shard id completion ``index`` runs: the ``index``-th id of ``shards`` in ascending order.

    ``shards`` is an interval string such as ``"2,5,8"`` or ``"0-999"`` (the shards this Job runs, e.g. the
    ones a previous run left unfinished); ``None`` means "shard id = index". O(number of intervals).
    """
    if index < 0:
        raise ValueError(f"completion index {index} is negative")
    if shards is None:
        return index
    if not shards.strip():
        raise ValueError(
            "AIRFLOW_KUEUE_SHARDS is set but empty: unset it (shard id = index) or list shard ids"
        )
    ids = IndexSet.parse(shards)
    remaining = index
    for first, last in ids.intervals:
        size = last - first + 1
        if remaining < size:
            return first + remaining
        remaining -= size
    raise ValueError(
        f"completion index {index} is out of range: AIRFLOW_KUEUE_SHARDS={shards!r} names only {len(ids)} "
        "shard ids (completions must equal the number of shard ids)"
    )


def shard_ids_for_index(index: int, shards: str | None, per_pod: str | None) -> tuple[int, ...]:
    """The shard ids completion ``index`` runs: with ``per_pod`` (``AIRFLOW_KUEUE_SHARDS_PER_POD``: a
    number above 1, or decreasing runs such as ``5x24,4x5,1x19``) the ``index``-th pack of ``shards``; else
    the one of ``shard_id_for_index``."""
    if per_pod is None or per_pod.strip() in ("", "1"):
        return (shard_id_for_index(index, shards),)
    if shards is None or not shards.strip():
        raise ValueError(
            f"AIRFLOW_KUEUE_SHARDS_PER_POD={per_pod} needs AIRFLOW_KUEUE_SHARDS (the shard ids the Job runs)"
        )
    packs = pack_shape(IndexSet.parse(shards), per_pod)
    if index < 0 or index >= packs.index_count:
        raise ValueError(
            f"completion index {index} is out of range: {packs.describe()} "
            f"(completions must be {packs.index_count})"
        )
    return tuple(packs.shards_of_index(index))


def pack_shape(shards: IndexSet, raw: str | None) -> ShardPacks:
    """``AIRFLOW_KUEUE_SHARDS_PER_POD`` over ``shards``; a bad value raises ``ValueError`` naming it."""
    try:
        return ShardPacks.parse(shards, raw or "1")
    except InvalidPacking as exc:
        raise ValueError(f"AIRFLOW_KUEUE_SHARDS_PER_POD={raw!r}: {exc}") from None
