"""Completion index → shard id: the pure mapping every pod of an IndexedJob applies to itself."""

from __future__ import annotations

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
