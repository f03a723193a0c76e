"""The null object of ``CheckpointSession``: a task without ``checkpointing=`` runs every shard each try,
keeps no ledger and hands its pods no checkpoint location, through the same calls (the ``ShardSession``
seam of ``shard_session``: no "checkpointing?" branches in the operators)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hooks.kind_client import KindClient
from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.checkpoints.shard_packing import ShardPacks
from ..kueue.figures.attempt_figures import AttemptFigures
from ..kueue.index_set import IndexSet


class NoCheckpointing:
    """A try's shards without checkpoints: each call of the seam does nothing, or says "every shard"."""

    keeps_ledger = False

    def __init__(self, shard_count: int) -> None:
        self.shard_count = shard_count

    def remaining(self, jobs: list[dict[str, Any]]) -> tuple[IndexSet, RunLedger | None]:
        """Every shard runs again; there is no ledger."""
        return IndexSet.range(0, self.shard_count), None

    def has_recorded_attempts(self) -> bool:
        return False  # no record: a first try's own object comes back through its create's 409

    def recorded_result(
        self,
        result: dict[str, Any],
        status: str,
        figures: AttemptFigures | None,
        read_job: Callable[[str], dict[str, Any] | None],
    ) -> tuple[dict[str, Any], RunLedger | None]:
        """The object's own result: there is no ledger to record in, or to sum over."""
        return result, None

    def prepare_pod_access(self) -> str | None:
        return None

    def hand_pods_their_sas(self, client: KindClient, obj: dict[str, Any], token: str | None) -> bool:
        """No checkpoint location, no credential."""
        return False

    def ensure_pod_access(self, client: KindClient, obj: dict[str, Any]) -> None:
        """A reattached object's pods need no credential."""

    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """The manifest as built: every index runs its own shard."""
        return manifest

    def record_attempt(self, job_name: str, packs: ShardPacks) -> RunLedger | None:
        return None

    def job_packs(self, job: dict[str, Any], default: IndexSet) -> ShardPacks:
        """One shard per index: packing needs the done markers of checkpointing (refused without it)."""
        return ShardPacks(default)

    def trigger_ledger(self) -> dict[str, Any] | None:
        return None

    def trigger_credential(self, job_name: str) -> dict[str, Any] | None:
        return None

    def clean_up_after_success(self) -> int:
        return 0
