"""A shard's input item (``shard.item``): item ``i`` of the task's ``shard_items=`` for shard ``i``.

Inline items come whole in the pod's environment (``SHARD_ITEMS_ENV``); staged ones (a JSON-lines blob the
operator copied into the shard container in chunks) are read one chunk at a time, with the pod's checkpoint
credential, and kept for the pod's other shards. Keyed by shard id, so a retry of only some shards and a
packed pod both read the right item.
"""

from __future__ import annotations

import json
from typing import Any

from ..kueue.checkpoints.shard_item_chunks import chunk_name, item_of_chunk
from ..kueue.errors import KueueProviderError
from ..kueue.names import SHARD_ITEMS_ENV
from .checkpoint_store import JsonStore
from .env import ShardEnv


class NoShardItem(LookupError, KueueProviderError):
    """The shard has no item: the task gave no ``shard_items``, or fewer than it runs shards."""


class ShardItems:
    """The items of one pod's shards (one per pod, shared by a pack's shards)."""

    def __init__(self, inline: str | None, blob: str | None, prefix: str) -> None:
        self.inline, self.blob, self.prefix = inline, blob, prefix
        self._inline: list[Any] | None = None
        self._chunks: dict[str, dict[str, Any] | None] = {}

    @classmethod
    def for_env(cls, env: ShardEnv) -> ShardItems | None:
        """The pod's items, or None when the task gave none."""
        if env.items is None and env.items_blob is None:
            return None
        return cls(env.items, env.items_blob, env.prefix)

    def item(self, shard_id: int, store: JsonStore) -> Any:
        """Shard ``shard_id``'s item (JSON value); ``NoShardItem`` names what is missing."""
        if self.inline is not None:
            items = self._inline_items()
            if not 0 <= shard_id < len(items):
                raise NoShardItem(
                    f"shard {shard_id}: {SHARD_ITEMS_ENV} holds {len(items)} items (0-{len(items) - 1})"
                )
            return items[shard_id]
        name = chunk_name(self.prefix, shard_id)
        if name not in self._chunks:
            self._chunks[name] = store.read_json(name)[0]
        try:
            return item_of_chunk(self._chunks[name], shard_id, name)
        except ValueError as exc:
            raise NoShardItem(f"{exc} (items from {self.blob})") from None

    def _inline_items(self) -> list[Any]:
        if self._inline is None:
            try:
                parsed = json.loads(self.inline or "")
            except ValueError:
                parsed = None
            if not isinstance(parsed, list):
                raise NoShardItem(
                    f"{SHARD_ITEMS_ENV} is not a JSON list (set by the operator's shard_items=)"
                )
            self._inline = parsed
        return self._inline
