"""Where staged shard items live in a task instance's shard container, and how a JSON-lines items blob is
read (pure): ``<prefix>/shards/items/<chunk>.json``, each ``{"first": <shard id>, "items": [...]}`` of up to
``ITEMS_PER_CHUNK`` items, so a pod reads one small blob for its shard, not the whole list. Under the shards'
folder, so the clean-up after success deletes them with the checkpoints (and then the empty container); the
done-marker listing skips them (``items`` is no shard id)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..spec.shard_items import MAX_BLOB_ITEMS_BYTES, MAX_ITEM_BYTES, MAX_ITEMS, InvalidShardItems
from .shard_blob_names import shards_folder

ITEMS_PER_CHUNK = 1000
ITEMS_FOLDER = "items/"
STAGED_INDEX = "index.json"
"""Written last in the folder: ``{"count", "source"}``; present means the items are fully staged."""


def items_folder(prefix: str) -> str:
    """``<prefix>/shards/items/`` (beside the shard ids' folders)."""
    return shards_folder(prefix) + ITEMS_FOLDER


def chunk_name(prefix: str, shard_id: int) -> str:
    """The staged blob holding shard ``shard_id``'s item."""
    if shard_id < 0:
        raise ValueError(f"shard id {shard_id} is negative")
    return f"{items_folder(prefix)}{shard_id // ITEMS_PER_CHUNK}.json"


def staged_index_name(prefix: str) -> str:
    return f"{items_folder(prefix)}{STAGED_INDEX}"


def chunks(prefix: str, items: list[Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(blob name, document)`` for every chunk of ``items``."""
    for first in range(0, len(items), ITEMS_PER_CHUNK):
        yield chunk_name(prefix, first), {"first": first, "items": items[first : first + ITEMS_PER_CHUNK]}


def item_of_chunk(document: dict[str, Any] | None, shard_id: int, name: str) -> Any:
    """Shard ``shard_id``'s item from its chunk's document; a clear error when it is not there."""
    if document is None:
        raise InvalidShardItems(
            f"shard {shard_id}: its items chunk {name} does not exist (staged items lost?)"
        )
    first, items = document.get("first"), document.get("items")
    if not isinstance(first, int) or not isinstance(items, list) or not 0 <= shard_id - first < len(items):
        raise InvalidShardItems(
            f"shard {shard_id}: the items chunk {name} has no item for it (the Job runs more shards than "
            "there are items)"
        )
    return items[shard_id - first]


def parse_jsonl(data: bytes, where: str) -> list[Any]:
    """The items of a JSON-lines blob: one JSON value per line (blank lines only at the end); errors name
    the line, never its content."""
    if len(data) > MAX_BLOB_ITEMS_BYTES:
        raise InvalidShardItems(
            f"shard_items: {where} is {len(data)} bytes, more than {MAX_BLOB_ITEMS_BYTES}"
        )
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise InvalidShardItems(f"shard_items: {where} is not UTF-8 text (byte {exc.start})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise InvalidShardItems(f"shard_items: {where} holds no items (one JSON value per line)")
    if len(lines) > MAX_ITEMS:
        raise InvalidShardItems(f"shard_items: {where} holds {len(lines)} lines, more than {MAX_ITEMS}")
    items = []
    for number, line in enumerate(lines):
        if len(line.encode()) > MAX_ITEM_BYTES:
            raise InvalidShardItems(
                f"shard_items: {where} line {number + 1} (item {number}) is over {MAX_ITEM_BYTES} bytes"
            )
        try:
            items.append(json.loads(line))
        except ValueError:
            raise InvalidShardItems(
                f"shard_items: {where} line {number + 1} (item {number}) is not one JSON value (JSON lines: "
                "one value per line, no blank lines between)"
            ) from None
    return items
