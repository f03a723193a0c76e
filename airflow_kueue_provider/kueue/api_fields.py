"""Tolerant reads of the dicts the API server returns: a missing or mistyped field reads as empty.

A Workload written by a newer (or older) Kueue may lack a field or shape it differently; a trigger that
follows it must keep going, so every read falls back to an empty value instead of raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def items(value: object) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def text(source: Mapping[str, Any] | None, key: str) -> str | None:
    """``source[key]`` when it is a non-empty string (``source`` may be None)."""
    return str_or_none(source.get(key)) if source is not None else None


def str_or_none(value: object) -> str | None:
    """``value`` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def count(value: object) -> int:
    """``value`` when it is an int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
