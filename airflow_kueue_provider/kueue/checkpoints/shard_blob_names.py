"""Where a shard's blobs live in its task instance's shard container: ``<prefix>/shards/<shard_id>/``, with
its checkpoints, ``done.json`` (the worker SDK writes them, the operator reads the done markers) and
``claim.json`` (the lease of a pod that took the shard over from a stopped one); and the release records of
stopped pods, ``<prefix>/released/<layout>/index-<i>.json`` (``worker/pack_handoff``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..index_set import IndexSet

DONE_BLOB = "done.json"
CLAIM_BLOB = "claim.json"


def shard_folder(prefix: str, shard_id: int) -> str:
    """``<prefix>/shards/<shard_id>/`` (with a trailing slash, so shard 1 never lists shard 10's blobs)."""
    if shard_id < 0:
        raise ValueError(f"shard id {shard_id} is negative")
    return f"{shards_folder(prefix)}{shard_id}/"


def shards_folder(prefix: str) -> str:
    """``<prefix>/shards/``: every shard's folder is under it."""
    clean = prefix.strip("/")
    if clean and any(part in ("", ".", "..") for part in clean.split("/")):
        raise ValueError(f"checkpoint prefix {prefix!r} has an empty, '.' or '..' path segment")
    return f"{clean}/shards/" if clean else "shards/"


def done_name(prefix: str, shard_id: int) -> str:
    return f"{shard_folder(prefix, shard_id)}{DONE_BLOB}"


def claim_name(prefix: str, shard_id: int) -> str:
    return f"{shard_folder(prefix, shard_id)}{CLAIM_BLOB}"


def released_folder(prefix: str, layout: str) -> str:
    """``<prefix>/released/<layout>/``: the release records of one Job layout's stopped pods."""
    if not layout or not layout.isalnum():
        raise ValueError(f"layout key {layout!r} must be letters and digits")
    return f"{shards_folder(prefix)[: -len('shards/')]}released/{layout}/"


def released_name(prefix: str, layout: str, index: int) -> str:
    if index < 0:
        raise ValueError(f"index {index} is negative")
    return f"{released_folder(prefix, layout)}index-{index}.json"


def done_shard_ids(names: Iterable[str], prefix: str) -> IndexSet:
    """The shard ids with a ``done.json`` among blob ``names`` (a listing of ``shards_folder(prefix)``)."""
    head = shards_folder(prefix)
    ids: list[int] = []
    for name in names:
        if not name.startswith(head) or not name.endswith(f"/{DONE_BLOB}"):
            continue
        middle = name[len(head) : -len(DONE_BLOB) - 1]
        if middle.isdigit() and middle.isascii():
            ids.append(int(middle))
    return IndexSet.from_indexes(ids)
