"""Which checkpoint prefixes a sweep may delete (pure).

Blobs live under a task instance's prefix ``<dag>/<run>/<task>[/<map index>]``: its ``ledger.json`` and its
``shards/...`` checkpoints. A prefix is stale when even its newest blob is older than the retention period,
so a run still writing is never swept.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta


def task_prefix(name: str) -> str | None:
    """The task-instance prefix of a blob this provider writes, or None for anything else."""
    if name.endswith("/ledger.json"):
        return name[: -len("/ledger.json")]
    head, sep, _ = name.partition("/shards/")
    return head if sep else None


def stale_prefixes(blobs: Iterable[tuple[str, datetime]], now: datetime, older_than: timedelta) -> list[str]:
    newest: dict[str, datetime] = {}
    for name, modified in blobs:
        prefix = task_prefix(name)
        if prefix is not None and (prefix not in newest or modified > newest[prefix]):
            newest[prefix] = modified
    return sorted(p for p, modified in newest.items() if now - modified > older_than)
