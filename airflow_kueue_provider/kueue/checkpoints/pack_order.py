"""A pack order as text: the shard ids an ordered ``ShardPacks`` runs, in the order it runs them, with
ascending consecutive runs collapsed (``"17,3-5,120"``), so the env a pod reads stays short."""

from __future__ import annotations


def order_text(order: tuple[int, ...]) -> str:
    """``(17, 3, 4, 5, 120)`` as ``"17,3-5,120"``: ascending consecutive runs collapsed."""
    parts: list[str] = []
    start = prev = None
    for shard_id in (*order, None):
        if prev is not None and shard_id == prev + 1:
            prev = shard_id
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = shard_id
    return ",".join(parts)


def parse_order(text: str, limit: int) -> tuple[int, ...] | None:
    """The inverse of ``order_text``; None for a malformed order or one of more than ``limit`` ids (read
    before it is expanded: a run such as ``0-999999999`` is refused without building it)."""
    order: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        ok = first.isdigit() and first.isascii() and (not dash or (last.isdigit() and last.isascii()))
        if not ok or (dash and int(last) < int(first)):
            return None
        stop = int(last if dash else first) + 1
        if len(order) + stop - int(first) > limit:
            return None
        order.extend(range(int(first), stop))
    return tuple(order)
