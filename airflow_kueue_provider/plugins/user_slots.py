"""Slots per user and per API server process: one counter for what the UI caps (live streams, page reads).

A slot is taken before the capped thing starts and given back by the release it returns (idempotent, from any
thread); the per-user map keeps only users holding a slot, so it is never larger than the total cap. A refusal
is the caller's exception type with a message that says how many are held, the cap, the option that raises
it and what to do (``Wording``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Wording:
    """How a refusal reads: ``held`` ``what`` are already ``state`` ..., then the hint of the cap hit."""

    what: str  # "live Kueue streams"
    state: str  # "open"
    user_hint: str  # "close a Kueue tab"
    total_hint: str  # "try again later"
    error: type[Exception]


class UserSlots:
    def __init__(self, per_user: int, total: int, options: tuple[str, str], wording: Wording) -> None:
        """``options``: the ``[kueue]`` options of the per-user and the total cap."""
        for option, value in zip(options, (per_user, total), strict=True):
            if value < 1:
                raise ValueError(
                    f"[kueue] {option} must be at least 1, got {value}; set it to a positive count"
                )
        self.per_user, self.total = per_user, total
        self.options, self.wording = options, wording
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    def taken(self, user: str) -> int:
        with self._lock:
            return self._held[user]

    @property
    def taken_total(self) -> int:
        with self._lock:
            return sum(self._held.values())

    @property
    def users(self) -> int:
        """Users holding a slot (the size of the per-user map)."""
        with self._lock:
            return len(self._held)

    def acquire(self, user: str) -> Callable[[], None]:
        """A slot of ``user``, and its release; the wording's error when either cap is reached."""
        w = self.wording
        with self._lock:
            mine, everyone = self._held[user], sum(self._held.values())
            if mine >= self.per_user:
                raise w.error(
                    f"{mine} {w.what} of yours are already {w.state} (at most {self.per_user} a user: "
                    f"[kueue] {self.options[0]}); {w.user_hint}, or ask for that option to be raised"
                )
            if everyone >= self.total:
                raise w.error(
                    f"{everyone} {w.what} are already {w.state} on this API server (at most {self.total}: "
                    f"[kueue] {self.options[1]}); {w.total_hint}, or ask for that option to be raised"
                )
        self._held[user] += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._held[user] -= 1
                if self._held[user] <= 0:
                    del self._held[user]

        return release
