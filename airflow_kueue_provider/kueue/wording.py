"""Counted nouns in log lines and results (pure): ``1 pod``, ``2 pods``, ``1 index``, ``6 indexes``.

A log line a human reads must not say "1 pods" or "completed all 1 indexes"; every module that counts
something in words uses ``counted``.
"""

from __future__ import annotations

IRREGULAR = {"index": "indexes"}  # the rest take an s


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` and ``noun``, the noun plural unless the number is 1: ``counted(1, "pod") == "1 pod"``."""
    if number == 1:
        return f"{number} {noun}"
    return f"{number} {plural or IRREGULAR.get(noun) or noun + 's'}"
