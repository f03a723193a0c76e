"""How current a watch is known to be, from what it delivers: no request asked.

A watch event carries its object as last written, and the newest ``managedFields`` time says when that was
(to the second, by the apiserver's clock). A watch delivers in resourceVersion order without gaps, so an
event of an object written at T shows that every change made before T has been delivered. While events keep
showing that (a busy namespace), the hub's periodic consistent LIST (``namespace_watch``) would find nothing
the watch has not delivered, and it is not sent; it is sent once no LIST and no event has shown the watch
current for a period: a quiet namespace, or a watch that fell silent or behind (its events then show old
writes, or none). An apiserver clock more than ``skew_seconds`` ahead of ours makes an event no evidence
at all; one ahead by less overstates the evidence by as much."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..kueue.api_time import last_written


class WatchCurrency:
    """Per kind, the moment (``time.monotonic``) up to which its watch is known to have delivered every
    change: the sending of a LIST that showed nothing undelivered, or the write of a delivered object."""

    def __init__(
        self,
        skew_seconds: float,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.skew_seconds = skew_seconds
        self._wall, self._monotonic = wall, monotonic
        self._as_of: dict[str, float] = {}

    def listed(self, kind: str, sent_at: float) -> None:
        """A LIST sent at ``sent_at`` (monotonic) showed nothing the watch had not delivered."""
        self._as_of[kind] = max(self._as_of.get(kind, sent_at), sent_at)

    def delivered(self, kind: str, obj: Mapping[str, Any]) -> None:
        """The watch delivered ``obj`` (not a bookmark): evidence up to its last write."""
        written = last_written(obj)
        if written is None:
            return
        age = self._wall() - written.timestamp()
        if age < -self.skew_seconds:
            return  # written "in our future": the clocks disagree, and the event proves nothing
        as_of = self._monotonic() - max(age, 0.0)
        if as_of > self._as_of.get(kind, float("-inf")):
            self._as_of[kind] = as_of

    def due_in(self, kind: str, period: float) -> float:
        """Seconds until the next periodic LIST of ``kind`` is due (<= 0: now): ``period`` after the latest
        evidence (a full period from now without any)."""
        now = self._monotonic()
        return self._as_of.setdefault(kind, now) + period - now
