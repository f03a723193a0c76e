"""Where one task instance's checkpoints live, shared by the parts of a ``CheckpointSession``: the run ledger
(in the base container, out of the pods' reach) and the shards' own container, whose name is salted.

The salt is drawn in the ledger's ETag-conditioned create (concurrent first tries agree on it); every later
use reads it from the ledger, so a ledger made anew after a delete names a new container.
"""

from __future__ import annotations

import secrets

from ..hooks.blob_containers import BlobAccountHook
from ..hooks.ledger_store import LedgerStore
from ..kueue.checkpoints.checkpoint_access import shard_container_name
from ..kueue.checkpoints.ledger import CONTAINER_SALT_HEX, RunLedger
from .checkpoint_config import Checkpointing


class CheckpointPlace:
    """The task instance's ledger store and salted shard container. The hook and store are given (the
    session builds them), so the parts share one of each and a test can hand in fakes."""

    def __init__(
        self,
        config: Checkpointing,
        prefix: str,
        hook: BlobAccountHook,
        ledger: LedgerStore,
        shard_count: int,
    ) -> None:
        self.config = config
        self.prefix = prefix
        self.hook = hook
        self.ledger = ledger
        self.shard_count = shard_count
        self._fresh_salt = secrets.token_hex(CONTAINER_SALT_HEX // 2)  # a ledger this session creates has it

    @property
    def container_salt(self) -> str | None:
        """The salt of the shard container's name, as the ledger this session saw first records it (read
        now if none yet; None: a ledger of before salts, or no ledger)."""
        if self.ledger.salt is None:
            self.ledger.read()
        return self.ledger.salt[0] if self.ledger.salt else None

    @property
    def shard_container(self) -> str:
        return self.named(self.container_salt)

    def named(self, salt: str | None) -> str:
        """The shard container's name with ``salt``."""
        return shard_container_name(self.config.container, self.prefix, salt)

    def salt_to_create(self) -> str | None:
        """The salt where this session makes the container (shaping, preparing pod access): with no ledger
        yet (a JobSet's first try, which records no attempt) it makes one holding its fresh salt,
        ETag-conditioned as any create."""
        if self.container_salt is None and self.ledger.salt is None:
            self.ledger.update(lambda current: current or self.new_ledger())
        return self.container_salt

    def new_ledger(self) -> RunLedger:
        """Where an update finds no ledger: one with the salt this session uses, or its fresh one (of two
        first tries, the ETag loser re-reads: merge keeps the winner's salt)."""
        salt = self.ledger.salt[0] if self.ledger.salt else self._fresh_salt
        return RunLedger(self.shard_count, container_salt=salt)
