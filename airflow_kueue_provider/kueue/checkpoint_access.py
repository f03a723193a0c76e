"""Where a task instance's shards checkpoint, and what their pods may touch there (pure).

A Blob SAS on a flat-namespace account can be scoped to an account, a container or one blob -- never to a
prefix. So each task instance (dag, run, task, map index) gets a **container of its own** for its shards'
checkpoints, and its pods get a SAS for that container only: one compromised shard can rewrite its own task
instance's checkpoints, but not another's, and no ledger (ledgers stay in the base container, where pods have
no access at all). Retries of a task instance share its container, so they resume from each other's
checkpoints.

The container is named ``<base head>-<32 hex of sha256(prefix)>`` (at most 63 characters, Azure's limit) and
carries the prefix in its metadata, so a sweep can tell which ledger it belongs to.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

SHARD_CONTAINER_HASH = 32  # hex characters of sha256(prefix): collisions are out of reach
SHARD_CONTAINER_HEAD = 63 - 1 - SHARD_CONTAINER_HASH
PREFIX_METADATA = "airflowkueueprefix"  # container metadata: the task-instance prefix it serves
SHARD_SAS_PERMISSIONS = "racwdl"  # read, add, create, write, delete, list: save, load, prune, mark done
CLOCK_SKEW = timedelta(minutes=5)  # a SAS starts this much in the past: the account's clock may be behind
MAX_CREDENTIAL_TTL = timedelta(days=7)  # Azure's limit for a user-delegation key (workload identity)
DEFAULT_CREDENTIAL_TTL = timedelta(hours=48)
_CONTAINER = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")


def is_container_name(name: str) -> bool:
    """Azure's rule: 3-63 of ``[a-z0-9-]``, starting and ending with a letter or digit, no ``--``."""
    return bool(_CONTAINER.fullmatch(name))


def shard_container_name(base: str, prefix: str) -> str:
    """The container of one task instance's shard checkpoints (``prefix``: ``ledger.ledger_prefix``)."""
    if not is_container_name(base):
        raise ValueError(
            f"container {base!r} is not a valid Blob container name: use 3-63 lowercase letters, digits and "
            "single hyphens, starting and ending with a letter or digit"
        )
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:SHARD_CONTAINER_HASH]
    return f"{base[:SHARD_CONTAINER_HEAD].rstrip('-')}-{digest}"


def is_shard_container_of(base: str, name: str) -> bool:
    """Whether ``name`` has the shape of a shard container made from ``base`` (the sweep also checks its
    metadata before touching it)."""
    head = base[:SHARD_CONTAINER_HEAD].rstrip("-")
    return re.fullmatch(re.escape(head) + rf"-[0-9a-f]{{{SHARD_CONTAINER_HASH}}}", name) is not None


def credential_window(now: datetime, ttl: timedelta) -> tuple[datetime, datetime]:
    """(start, expiry) of a pod credential issued at ``now``; ``ttl`` must be within MAX_CREDENTIAL_TTL."""
    if not timedelta(0) < ttl <= MAX_CREDENTIAL_TTL:
        raise ValueError(
            f"credential_ttl={ttl} must be more than 0 and at most {MAX_CREDENTIAL_TTL.days} days "
            "(Azure's limit for a user-delegation SAS): set it to the longest a Job may queue and run"
        )
    return now - CLOCK_SKEW, now + ttl
