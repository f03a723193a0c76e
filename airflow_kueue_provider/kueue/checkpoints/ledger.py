"""The run ledger: which shards of a task instance finished, over every attempt (pure value object).

One ledger per (dag, run, task, map index) lives in Blob Storage next to the shards' checkpoints. Shards are
numbered 0..shard_count-1; an attempt's Job runs a subset of them (all at first, the unfinished ones on a
retry) and its index ``i`` runs the ``i``-th shard of that subset, or in a packed Job the ``i``-th pack
(``shard_packing``): a failed pack's shards count as failed until their done markers say
otherwise (``with_done_shards``).  ``completed`` only ever grows, and
``merge`` is a union, so two writers that race (ETag conflict -> re-read -> merge -> write) lose nothing.

The ledger also holds its task instance's ``container_salt`` (``checkpoint_access.shard_container_name``):
drawn when the ledger is created, kept by every merge, so a ledger (and its container) created anew after a
delete gets a new shard container name that no SAS signed for the old one opens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

from ..errors import KueueProviderError
from ..figures.attempt_figures import AttemptFigures
from ..index_set import IndexSet
from .shard_packing import ShardPacks

LEDGER_VERSION = 1
CONTAINER_SALT_HEX = 32  # random hex characters of a shard container's salt (128 bits)
RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"
"""An attempt's status in the ledger (and ``spill.SPILLED_STATUS``)."""


def attempt_status(outcome: str | None = None, *, finished_condition: str | None = None) -> str:
    """The one mapping to an attempt's status: from a trigger outcome's status (None while the Job runs)
    or from the Job's finished condition type (``Complete``/``Failed``; None while it runs)."""
    if outcome is not None:
        return SUCCEEDED if outcome == "success" else FAILED
    return {"Complete": SUCCEEDED, "Failed": FAILED}.get(str(finished_condition), RUNNING)


def is_container_salt(value: str) -> bool:
    """Whether ``value`` has the form of a shard container's salt (the ledger's and the metadata's)."""
    return len(value) == CONTAINER_SALT_HEX and all(c in "0123456789abcdef" for c in value)


def _json_shape(shape: str) -> int | str:
    """Even packs as the number ledgers have always held; decreasing runs as their text."""
    return int(shape) if shape.isdigit() else shape


@dataclass(frozen=True)
class Attempt:
    try_number: int
    job_name: str
    shards: IndexSet
    """The shard ids this attempt's Job runs (index i runs the i-th of them)."""
    completed: IndexSet = field(default_factory=IndexSet)
    """Shard ids this attempt completed."""
    failed: IndexSet = field(default_factory=IndexSet)
    evictions: int = 0
    status: str = "running"
    started_at: str | None = None
    finished_at: str | None = None
    figures: AttemptFigures | None = None
    """Its Job's pods, queue and run time and cost, recorded when the attempt ended (None before, and in
    ledgers written before figures were kept)."""
    packing: str = "1"
    """The Job's ``ShardPacks.shape``: shards per index (``"1"`` in ledgers written before packing existed),
    or decreasing runs (``"5x24,4x5,1x19"``). Kept under the key ``per_pod``: a provider that knows only
    even packs fails loudly on runs (``int()``) instead of mapping indexes to the wrong shards."""

    @property
    def packs(self) -> ShardPacks:
        return ShardPacks.parse(self.shards, self.packing)

    def merged(self, other: Attempt) -> Attempt:
        """Both writers' knowledge: completed/failed unions, the larger eviction count, a final status."""
        final = other.status if other.status != "running" else self.status
        return replace(
            self,
            completed=self.completed | other.completed,
            failed=(self.failed | other.failed) - (self.completed | other.completed),
            evictions=max(self.evictions, other.evictions),
            status=final,
            finished_at=self.finished_at or other.finished_at,
            figures=other.figures or self.figures,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "try_number": self.try_number,
            "job_name": self.job_name,
            "shards": str(self.shards),
            "completed": str(self.completed),
            "failed": str(self.failed),
            "evictions": self.evictions,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            **({"figures": self.figures.to_dict()} if self.figures else {}),
            **({"per_pod": _json_shape(self.packing)} if self.packing != "1" else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        return cls(
            try_number=int(data["try_number"]),
            job_name=str(data["job_name"]),
            shards=IndexSet.parse(data.get("shards")),
            completed=IndexSet.parse(data.get("completed")),
            failed=IndexSet.parse(data.get("failed")),
            evictions=int(data.get("evictions") or 0),
            status=str(data.get("status") or "running"),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            figures=AttemptFigures.from_dict(data["figures"]) if data.get("figures") else None,
            packing=str(data.get("per_pod") or 1),
        )


@dataclass(frozen=True)
class RunLedger:
    shard_count: int
    attempts: tuple[Attempt, ...] = ()
    container_salt: str | None = None
    """The salt of the task instance's shard container name; None in a ledger written before salts (its
    container has the unsalted name)."""

    def __post_init__(self) -> None:
        if self.container_salt is not None and not is_container_salt(self.container_salt):
            raise ValueError(
                f"container_salt={self.container_salt!r} is not {CONTAINER_SALT_HEX} lowercase hex"
            )

    @property
    def completed(self) -> IndexSet:
        done = IndexSet()
        for attempt in self.attempts:
            done |= attempt.completed
        return done

    @property
    def remaining(self) -> IndexSet:
        """Shards no attempt has completed: what a retry must run."""
        return IndexSet.range(0, self.shard_count) - self.completed

    @property
    def failed(self) -> IndexSet:
        """Shards that failed in some attempt and were never completed."""
        failed = IndexSet()
        for attempt in self.attempts:
            failed |= attempt.failed
        return failed - self.completed

    @property
    def evictions(self) -> int:
        return sum(a.evictions for a in self.attempts)

    def retry_plan(self, packs_of: Callable[[IndexSet], ShardPacks] = ShardPacks) -> str:
        """What a new attempt runs, in shard ids: ``298 of 300 shards done in 1 earlier attempt(s); running
        the 2 unfinished (7,123) as Job indexes 0-1`` (``packs_of``: how the new Job packs its shards)."""
        left = self.remaining
        done = (
            f"{len(self.completed)} of {self.shard_count} shards done in {len(self.attempts)} earlier "
            "attempt(s)"
        )
        if not left:
            return f"{done}; nothing left to run"
        text = str(left)
        text = text if len(text) <= 80 else text[:79].rsplit(",", 1)[0] + ",…"
        packs = packs_of(left)
        count = packs.index_count
        indexes = "index 0" if count == 1 else f"indexes 0-{count - 1}"
        packed = f" ({packs.describe()})" if packs.per_pod > 1 and len(left) > 1 else ""
        return f"{done}; running the {len(left)} unfinished ({text}) as Job {indexes}{packed}"

    def attempt(self, job_name: str) -> Attempt | None:
        return next((a for a in self.attempts if a.job_name == job_name), None)

    def with_attempt(self, attempt: Attempt) -> RunLedger:
        """Add ``attempt``, or merge it into the recorded attempt of the same Job."""
        known = self.attempt(attempt.job_name)
        if known is None:
            return replace(self, attempts=(*self.attempts, attempt))
        merged = known.merged(attempt)
        return replace(self, attempts=tuple(merged if a is known else a for a in self.attempts))

    def with_job_progress(
        self,
        job_name: str,
        completed_indexes: IndexSet,
        failed_indexes: IndexSet,
        *,
        evictions: int = 0,
        status: str = "running",
        finished_at: str | None = None,
        figures: AttemptFigures | None = None,
    ) -> RunLedger:
        """Record a Job's progress, given in Job indexes, as shard ids of its attempt (every shard of a
        failed pack counts as failed: ``with_done_shards`` corrects it from the done markers)."""
        known = self.attempt(job_name)
        if known is None:
            raise UnknownAttempt(f"Job {job_name} is not an attempt of this ledger")
        packs = known.packs
        progress = replace(
            known,
            completed=packs.shards_of(completed_indexes),
            failed=packs.shards_of(failed_indexes),
            evictions=evictions,
            status=status,
            finished_at=finished_at,
            # the try that made the Job, not the one that reports it (a cleared try reattaches)
            figures=replace(figures, try_number=known.try_number) if figures else known.figures,
        )
        return self.with_attempt(progress)

    def with_done_shards(self, job_name: str, done: IndexSet) -> RunLedger:
        """Add the shards of ``job_name``'s attempt that have a done marker (a failed pack finished some of
        its shards before one failed; only those are run again)."""
        known = self.attempt(job_name)
        if known is None:
            raise UnknownAttempt(f"Job {job_name} is not an attempt of this ledger")
        return self.with_attempt(replace(known, completed=known.completed | (done & known.shards)))

    def merge(self, other: RunLedger) -> RunLedger:
        if other.shard_count != self.shard_count:
            raise ValueError(f"ledgers of {self.shard_count} and {other.shard_count} shards cannot be merged")
        merged = replace(self, container_salt=self.container_salt or other.container_salt)
        for attempt in other.attempts:
            merged = merged.with_attempt(attempt)
        return merged

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": LEDGER_VERSION,
            "shard_count": self.shard_count,
            "completed": str(self.completed),
            "attempts": [a.to_dict() for a in self.attempts],
            **({"container_salt": self.container_salt} if self.container_salt else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunLedger:
        return cls(
            int(data["shard_count"]),
            tuple(Attempt.from_dict(a) for a in data.get("attempts") or ()),
            str(data["container_salt"]) if data.get("container_salt") else None,
        )


class UnknownAttempt(LookupError, KueueProviderError):
    """Progress for a Job the ledger has no attempt of (it predates checkpointing, or another ledger's)."""


MAX_SEGMENT = 200  # characters of one encoded path segment; longer ids keep a head and a hash


def path_segment(value: str) -> str:
    """One id (dag, run or task id) as exactly one blob-path segment, injectively.

    Percent-encoded with nothing left as is but ``[A-Za-z0-9_-]``: ``/`` cannot split it, ``.`` and ``..``
    cannot move it (they become ``%2E``), and two ids never share a segment. An id whose encoding is longer
    than MAX_SEGMENT keeps a readable head and ``~`` + 16 hex of its sha256 (``~`` appears nowhere else).
    """
    encoded = quote(value, safe="").replace(".", "%2E").replace("~", "%7E")
    if len(encoded) <= MAX_SEGMENT:
        return encoded
    head = value
    while len(quote(head, safe="").replace(".", "%2E").replace("~", "%7E")) > MAX_SEGMENT - 17:
        head = head[: len(head) * 3 // 4]
    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
    return quote(head, safe="").replace(".", "%2E").replace("~", "%7E") + "~" + digest


def ledger_prefix(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """Blob prefix of a task instance's ledger and checkpoints: ``<dag>/<run>/<task>[/<map index>]``, each id
    one ``path_segment``. The operator, the trigger and (through its env) the worker SDK all use this."""
    parts = [path_segment(dag_id), path_segment(run_id), path_segment(task_id)]
    return "/".join(parts + ([str(int(map_index))] if map_index >= 0 else []))
