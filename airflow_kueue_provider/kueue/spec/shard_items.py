"""Shard inputs (``shard_items=``): item ``i`` goes to shard ``i`` (pure).

Two shapes. A list of JSON values travels inline, as compact JSON in one variable of the pod contract
(``SHARD_ITEMS_ENV``): at most ``MAX_INLINE_ITEMS_BYTES``, well below Linux's 128 KiB limit on one
environment string. A larger list is a JSON-lines blob in the checkpoint container (``ShardItemsBlob``, or
the string ``blob://<path>``): the operator stages it, in chunks, into the task instance's shard container,
where the pods read it with the credential they already have for their checkpoints; only the reference
travels in the pod's environment.

Items are keyed by shard id, not by pod index: a retry that runs only the unfinished shards, and a packed
pod that runs several, still give item ``i`` to shard ``i``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import KueueProviderError
from .job_spec import MAX_COMPLETIONS

MAX_INLINE_ITEMS_BYTES = 64 * 1024
"""Inline items' compact JSON: one pod environment string (Linux refuses one over 128 KiB at exec)."""
MAX_ITEMS = MAX_COMPLETIONS
"""One item per shard: no more items than a Job has indexes."""
MAX_BLOB_ITEMS_BYTES = 256 * 1024 * 1024
"""A JSON-lines items blob the operator stages (read whole, once per try)."""
MAX_ITEM_BYTES = 1024 * 1024
"""One item of a blob (a pod reads the chunk holding it: at most ``ITEMS_PER_CHUNK`` of these)."""
BLOB_SCHEME = "blob://"


class InvalidShardItems(ValueError, KueueProviderError):
    """``shard_items`` is not a list of JSON values (or a blob reference) within the limits."""


@dataclass(frozen=True)
class ShardItemsBlob:
    """A JSON-lines blob in the checkpoint container (``Checkpointing(container=...)``): line ``i`` (one
    JSON value) is shard ``i``'s item. For lists over the inline limit."""

    path: str

    def __post_init__(self) -> None:
        path = self.path.strip() if isinstance(self.path, str) else self.path
        if not isinstance(path, str) or not path or path.startswith("/"):
            raise InvalidShardItems(
                f"shard_items: ShardItemsBlob({self.path!r}) needs a blob path inside the checkpoint "
                "container, e.g. ShardItemsBlob('inputs/items.jsonl')"
            )
        if any(part in ("", ".", "..") for part in path.split("/")):
            raise InvalidShardItems(
                f"shard_items: ShardItemsBlob({self.path!r}) has an empty, '.' or '..' path segment"
            )
        object.__setattr__(self, "path", path)

    def __str__(self) -> str:
        return f"{BLOB_SCHEME}{self.path}"


@dataclass(frozen=True)
class InlineItems:
    """A checked list of items and its compact JSON (what the pods get)."""

    items: tuple[Any, ...]
    encoded: str

    def __len__(self) -> int:
        return len(self.items)


ShardItems = InlineItems | ShardItemsBlob


def parse_shard_items(value: object) -> ShardItems | None:
    """``shard_items`` as given or rendered: a list (tuple) of JSON values, a string holding a JSON list
    (a rendered ``{{ ... | tojson }}``), ``blob://<path>``, a ``ShardItemsBlob``, or None."""
    if value is None or isinstance(value, ShardItemsBlob):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.startswith(BLOB_SCHEME):
            return ShardItemsBlob(text[len(BLOB_SCHEME) :])
        try:
            value = json.loads(text)
        except ValueError:
            raise InvalidShardItems(
                "shard_items: a string must hold a JSON list (e.g. rendered with '| tojson') or "
                f"'{BLOB_SCHEME}<path>' of a JSON-lines blob; it is neither ({len(text)} characters)"
            ) from None
        if not isinstance(value, list):
            raise InvalidShardItems(
                f"shard_items: the string holds a JSON {type(value).__name__}, not a list of items"
            )
    if not isinstance(value, (list, tuple)):
        raise InvalidShardItems(
            f"shard_items: expected a list of JSON values, a JSON list string or ShardItemsBlob(path), got "
            f"{type(value).__name__}"
        )
    return inline_items(value)


def inline_items(items: Sequence[Any]) -> InlineItems:
    """Check the count, that each item is JSON (naming its index, never its value) and the size."""
    if not items:
        raise InvalidShardItems("shard_items is empty: give at least one item (one per shard)")
    if len(items) > MAX_ITEMS:
        raise InvalidShardItems(
            f"shard_items holds {len(items)} items, more than {MAX_ITEMS} (one per shard, at most one Job's "
            "completions)"
        )
    for index, item in enumerate(items):
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidShardItems(
                f"shard_items: item {index} is not a JSON value ({type(item).__name__}: "
                f"{type(exc).__name__}): use strings, numbers, booleans, null, lists and dicts"
            ) from None
    encoded = json.dumps(list(items), separators=(",", ":"), allow_nan=False)
    if (size := len(encoded.encode())) > MAX_INLINE_ITEMS_BYTES:
        raise InvalidShardItems(
            f"shard_items: {len(items)} items are {size} bytes of JSON, more than the "
            f"{MAX_INLINE_ITEMS_BYTES} that travel inline in the pods' environment: write them as JSON "
            "lines to a blob in the checkpoint container and pass shard_items=ShardItemsBlob('<path>.jsonl')"
        )
    return InlineItems(tuple(items), encoded)


def first_secret_item(items: Sequence[Any], holds_secret: Callable[[Any], bool]) -> int | None:
    """The index of the first item ``holds_secret`` flags (the caller's masker check), or None."""
    for index, item in enumerate(items):
        if holds_secret(item):
            return index
    return None


def completions_for(completions: int, count: int, *, given: bool) -> int:
    """The Job's completions with ``count`` items: derived when not ``given``, else they must agree."""
    if not given:
        return count
    if completions != count:
        raise InvalidShardItems(
            f"completions={completions} but shard_items holds {count} items (one per shard): set "
            f"completions={count}, or leave completions unset to take it from the items"
        )
    return completions
