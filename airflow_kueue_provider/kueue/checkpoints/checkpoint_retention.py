"""Which checkpoint blobs a sweep may delete (pure).

Blobs live under a task instance's prefix ``<dag>/<run>/<task>[/<map index>]``, each id one encoded path
segment (``ledger.path_segment``): its ``ledger.json`` and its ``shards/<n>/...`` checkpoints. Only names of
exactly that layout are the provider's; anything else in the container (``results/genome/shards/x.bam``) is
not. A prefix is stale when even its newest blob is older than the retention period, so a run still writing
(a live retry's checkpoints, a ledger the trigger just wrote) is never swept. Blob times alone cannot tell a
Job that waits in its queue (it writes nothing) from an abandoned one, so a prefix whose ledger has a running
attempt, or that a live Job of the provider belongs to, is protected: kept whatever its age.

A shard container whose salt is not its ledger's (``RunLedger.container_salt``: the ledger was deleted and
made anew, with a new container) is an **orphan**: no try reads it again. Its checkpoints are weighed on their
own, not with the prefix's live ledger, and go under the same rules (old, and never while the prefix is
protected).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

LEDGER = "ledger.json"
MIN_OLDER_THAN = timedelta(days=1)  # the sweep's floor: nothing younger than a day is ever a candidate
SHARDS = "shards"
_SEGMENT = re.compile(r"(?:[A-Za-z0-9_-]|%[0-9A-F]{2})+(?:~[0-9a-f]{16})?")


@dataclass(frozen=True)
class BlobInfo:
    name: str
    modified: datetime
    etag: str | None = None
    container: str | None = None  # None: the base container; else a task instance's shard container


@dataclass(frozen=True)
class ShardContainer:
    """A shard container as listed: the task-instance prefix and salt of its metadata, its last change."""

    prefix: str
    modified: datetime
    salt: str | None = None


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep deletes (each blob with the ETag it was listed with) and which prefixes it keeps."""

    delete: tuple[BlobInfo, ...]
    stale_prefixes: tuple[str, ...]
    kept_prefixes: tuple[str, ...]
    protected: tuple[tuple[str, str], ...] = ()
    """(prefix, why) of each old prefix kept because a Job of it may still run."""
    orphaned: tuple[str, ...] = ()
    """Orphan shard containers (not their ledger's) that go, with their blobs (in ``delete``)."""


def check_older_than(older_than: timedelta) -> timedelta:
    """``older_than`` if it is at least ``MIN_OLDER_THAN``; else a ValueError saying the floor."""
    if not isinstance(older_than, timedelta) or older_than < MIN_OLDER_THAN:
        raise ValueError(
            f"older_than={older_than!r} is below the sweep's floor of {MIN_OLDER_THAN}: a younger prefix may "
            f"belong to a run that is still queued or retrying; use older_than=timedelta(days=1) or more"
        )
    return older_than


def task_prefix(name: str) -> str | None:
    """The task-instance prefix of a blob in the provider's exact layout, or None for anything else."""
    parts = name.split("/")
    if len(parts) < 4 or not all(_SEGMENT.fullmatch(p) for p in parts[:3]):
        return None
    rest_at = 4 if parts[3].isdigit() else 3
    rest = parts[rest_at:]
    ours = rest == [LEDGER] or (len(rest) >= 3 and rest[0] == SHARDS and rest[1].isdigit() and all(rest[2:]))
    return "/".join(parts[:rest_at]) if ours else None


def plan_sweep(
    blobs: Iterable[BlobInfo],
    now: datetime,
    older_than: timedelta,
    protected: Mapping[str, str] | None = None,
    orphans: Mapping[str, ShardContainer] | None = None,
) -> SweepPlan:
    """Delete every blob of a prefix whose newest blob is older than ``older_than``; keep the others whole,
    and every ``protected`` prefix (prefix -> why: a running attempt, a live Job). The blobs of ``orphans``
    (name -> container: not their ledger's) count for no prefix: an orphan goes whole once it and its
    newest blob are old, unless its prefix is protected."""
    guard = dict(protected or {})
    lost = dict(orphans or {})
    by_prefix: dict[str, list[BlobInfo]] = {}
    by_orphan: dict[str, list[BlobInfo]] = {name: [] for name in lost}
    for blob in blobs:
        prefix = task_prefix(blob.name)
        if blob.container in lost:
            by_orphan[blob.container].append(blob)
        elif prefix is not None:
            by_prefix.setdefault(prefix, []).append(blob)
    old = {p for p, items in by_prefix.items() if now - max(b.modified for b in items) > older_than}
    stale = sorted(old - set(guard))
    kept = sorted((set(by_prefix) - set(stale)) | set(guard))
    gone = sorted(
        name
        for name, items in by_orphan.items()
        if lost[name].prefix not in guard
        and now - max([lost[name].modified, *(b.modified for b in items)]) > older_than
    )
    delete = tuple(b for p in stale for b in sorted(by_prefix[p], key=lambda b: (b.container or "", b.name)))
    delete += tuple(b for name in gone for b in sorted(by_orphan[name], key=lambda b: b.name))
    return SweepPlan(delete, tuple(stale), tuple(kept), tuple(sorted(guard.items())), tuple(gone))


def maybe_orphans(
    containers: Mapping[str, ShardContainer],
    stale: Iterable[str],
    blobs: Iterable[BlobInfo],
    now: datetime,
    older_than: timedelta,
) -> list[str]:
    """The shard containers whose ledger a sweep must read to tell whether they are orphans: those of a
    prefix it keeps (a stale one goes whole anyway) that are old and hold only old blobs."""
    gone = set(stale)
    newest: dict[str, datetime] = {}
    for blob in blobs:
        if blob.container is not None:
            newest[blob.container] = max(blob.modified, newest.get(blob.container, blob.modified))
    return sorted(
        name
        for name, c in containers.items()
        if c.prefix not in gone and now - max(c.modified, newest.get(name, c.modified)) > older_than
    )


def is_orphan(container: ShardContainer, ledger_salt: str | None) -> bool:
    """Whether a container is not the one its ledger (of salt ``ledger_salt``) names: no try reads it."""
    return container.salt != ledger_salt


def shard_blobs_of(container: str, prefix: str, blobs: Iterable[BlobInfo]) -> list[BlobInfo]:
    """The blobs of a shard container that a sweep may weigh: only its own task instance's checkpoints
    (its pods may write any name there; one shaped like another prefix must not keep that prefix alive)."""
    own = f"{prefix}/{SHARDS}/"
    return [
        BlobInfo(b.name, b.modified, b.etag, container)
        for b in blobs
        if b.name.startswith(own) and task_prefix(b.name) == prefix
    ]


def empty_containers_to_delete(
    containers: Mapping[str, ShardContainer],
    plan: SweepPlan,
    blobs: Iterable[BlobInfo],
    now: datetime,
    older_than: timedelta,
) -> list[str]:
    """Shard containers to remove after the plan's deletes: those of a stale prefix, the plan's orphans,
    and old ones that hold nothing of a prefix anyone still writes."""
    live = set(plan.kept_prefixes)
    stale = set(plan.stale_prefixes)
    orphaned = set(plan.orphaned)
    seen = {task_prefix(b.name) for b in blobs}
    return sorted(
        name
        for name, c in containers.items()
        if c.prefix in stale
        or name in orphaned
        or (c.prefix not in live and c.prefix not in seen and now - c.modified > older_than)
    )


def stale_prefixes(blobs: Iterable[tuple[str, datetime]], now: datetime, older_than: timedelta) -> list[str]:
    """The prefixes ``plan_sweep`` would delete, from (name, modified) pairs."""
    plan = plan_sweep((BlobInfo(n, m) for n, m in blobs), now, older_than)
    return list(plan.stale_prefixes)
