"""The shards seam: what the operator template (``kueue_operator``) and the kinds (``indexed_job``,
``jobset``) ask of a try's shards, so the template never asks "checkpointing?".

``CheckpointSession`` (Blob checkpoints and a ledger) and ``NoCheckpointing`` (its null object) both satisfy
it. What only a checkpointed task has (its result over every attempt, its shards' return values) is reached
after narrowing to ``CheckpointSession``, and is not part of the seam.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..hooks.kind_client import KindClient
from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.checkpoints.shard_packing import ShardPacks
from ..kueue.figures.attempt_figures import AttemptFigures
from ..kueue.index_set import IndexSet


@runtime_checkable
class ShardSession(Protocol):
    """One try's shards: which run, how the object runs them, their pods' credential, the record."""

    @property
    def keeps_ledger(self) -> bool:
        """Whether a ledger (not a completed earlier object) decides what a retry runs."""
        ...

    @property
    def shard_count(self) -> int:
        """The task instance's shards (numbered 0..shard_count-1)."""
        ...

    def remaining(self, jobs: list[dict[str, Any]]) -> tuple[IndexSet, RunLedger | None]:
        """The shards this try runs, given the earlier attempts' objects, and the ledger if there is one."""
        ...

    def has_recorded_attempts(self) -> bool:
        """Whether the record knows an attempt of the task instance (a first try that has one ran before:
        its worker died, so it looks for the objects that run left)."""
        ...

    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """``manifest`` made to run exactly ``shards``, its pods told where to checkpoint."""
        ...

    def job_packs(self, job: dict[str, Any], default: IndexSet) -> ShardPacks:
        """The shards ``job`` runs and how many each index runs (``default`` where it does not say)."""
        ...

    def prepare_pod_access(self) -> str | None:
        """The pods' credential, made before the object (None: the pods need none)."""
        ...

    def hand_pods_their_sas(self, client: KindClient, obj: dict[str, Any], token: str | None) -> bool:
        """Hand ``obj``'s pods ``token``; returns whether a Secret was created."""
        ...

    def ensure_pod_access(self, client: KindClient, obj: dict[str, Any]) -> None:
        """On reattach: what a dead worker left undone for ``obj``'s pods' credential."""
        ...

    def record_attempt(self, job_name: str, packs: ShardPacks) -> RunLedger | None:
        """Record a submitted attempt (None: nothing is recorded)."""
        ...

    def trigger_ledger(self) -> dict[str, Any] | None:
        """What the trigger needs to keep the ledger current (None: no ledger)."""
        ...

    def trigger_credential(self, job_name: str) -> dict[str, Any] | None:
        """What the trigger needs to keep the pods' credential valid (None: nothing to renew)."""
        ...

    def recorded_result(
        self,
        result: dict[str, Any],
        status: str,
        figures: AttemptFigures | None,
        read_job: Callable[[str], dict[str, Any] | None],
    ) -> tuple[dict[str, Any], RunLedger | None]:
        """The task's result with the attempt's end recorded, and the ledger if one was written."""
        ...

    def clean_up_after_success(self) -> int:
        """Delete what the shards left (their checkpoints); returns how many blobs went."""
        ...
