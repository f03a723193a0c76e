"""A hub's watch rounds of one kind and the periodic LIST beside them (``NamespaceWatch`` runs them after
each LIST): a round the server ends on time goes on from its last resourceVersion; a periodic LIST that
shows what the watch did not deliver, or a round that ends early, sends the hub back to LIST."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from ..hooks.async_client import ListTooLong
from ..hooks.kueue_async_hook import api_status
from ..kueue.errors import KueueProviderError
from .cache import slim, slot_key
from .caps import MAX_OBJECTS_OPTION, over_cap
from .freshness import WatchCurrency
from .hub_state import HubState
from .racing import closing_stream, first_of

log = logging.getLogger(__name__)

# A consistent LIST of each kind every RESYNC_SECONDS is the safety net against a watch that stays open, gets
# its bookmarks, yet misses changes: seen here under CPU starvation, an apiserver whose watch cache stopped
# following etcd for minutes (the Job had finished, a GET showed it, the watch delivered nothing). Cost: one
# LIST per kind and namespace per period, not per Job, and none while the watch's events show it current.
RESYNC_SECONDS = 120.0
WATCH_ROUND_SECONDS = 600.0
"""The apiserver ends each watch after about this (client-go's reflector asks for 5-10 minutes); the hub then
watches on from the last resourceVersion delivered (no LIST). Between, the periodic LIST runs beside the open
watch, which stays open unless the LIST shows it lagging: one WATCH a round instead of one a LIST."""
LAG_GRACE_SECONDS = 10.0
"""How long an object a periodic LIST shows otherwise than the cache may take to arrive on the watch (an
event already on its way) before the hub calls the watch lagging."""
WATCH_READ_TIMEOUT = 120.0  # no byte for 2 bookmark intervals (the apiserver sends one every ~60 s): dead


class WatchStalled(RuntimeError, KueueProviderError):
    """A watch connection stayed open but delivered nothing, not even the apiserver's periodic bookmark."""


class WatchRounds(HubState):
    """The watch rounds and periodic LISTs of a hub's kinds (mixed under ``NamespaceWatch``)."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self._touched: dict[str, set[str]] = {}
        """Slot -> keys the watch changed since the running periodic LIST was sent (``_resync_checks``)."""
        self.currency = WatchCurrency(LAG_GRACE_SECONDS)
        self._resume_from: dict[str, str] = {}
        """Slot -> the resourceVersion its watch round last delivered: the next round starts there."""

    async def _watch_rounds(
        self,
        kind: str,
        version: str,
        list_fn: Callable[..., Any],
        watch_fn: Callable[..., Any],
        apply: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """Watch rounds from ``version`` until the hub must LIST again: a periodic LIST showed the watch
        lagging, or the server ended a round early (410 Gone, a closed connection). A round the server ended
        on time goes on from the last resourceVersion it delivered (a bookmark's, mostly), without a LIST, as
        client-go's reflector does."""
        while True:
            round_seconds = int(WATCH_ROUND_SECONDS * random.uniform(0.9, 1.1))
            started, self._resume_from[kind] = time.monotonic(), ""
            events = watch_fn(self.namespace, version, round_seconds, WATCH_READ_TIMEOUT)
            watching = self._watch_round(kind, events, apply)
            lagging = await first_of(watching, self._resync_checks(kind, list_fn))
            if lagging:
                log.info(
                    "%s in %s: %d object(s) a periodic LIST showed were not delivered by the watch within "
                    "%.0fs; listing and watching again",
                    kind,
                    self.namespace,
                    lagging,
                    LAG_GRACE_SECONDS,
                )
                return
            version = self._resume_from.pop(kind, "")
            if not version or time.monotonic() - started < round_seconds / 2:
                return

    async def _list_capped(self, kind: str, list_fn: Callable[..., Any]) -> tuple[list[dict[str, Any]], str]:
        try:  # slimmed page by page, and no further than the cap: a flood costs one page at a time
            items, version = await list_fn(self.namespace, keep=slim, max_items=self.caps.max_objects)
        except ListTooLong as exc:
            limit = self.caps.max_objects
            raise over_cap(self.namespace, kind, MAX_OBJECTS_OPTION, limit, exc.count, "objects") from None
        return items, version

    async def _watch_round(self, kind: str, events: Any, apply: Callable[[str, dict[str, Any]], None]) -> int:
        """Apply one watch round's events until the server ends it (after about WATCH_ROUND_SECONDS)."""
        try:
            async with closing_stream(events):
                async for event_type, obj in events:
                    self.kind_failures.watched(kind)
                    self.events[kind] = self.events.get(kind, 0) + 1
                    self._resume_from[kind] = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                    if event_type != "BOOKMARK":
                        touched, key = self._touched.get(kind), slot_key(kind, obj)
                        if touched is not None and key is not None:
                            touched.add(key)
                        self.currency.delivered(kind, obj)
                        apply(event_type, obj)
            self.kind_failures.watched(kind)  # a round the server ended: the watch works
        except TimeoutError as exc:
            raise WatchStalled(
                f"no byte on the {kind} watch for {WATCH_READ_TIMEOUT:.0f}s (not even a bookmark)"
            ) from exc
        except Exception as exc:
            if api_status(exc) != 410:
                exc.watch_phase = "watch"  # type: ignore[attr-defined]  # counted apart from its LIST
                raise
            self._resume_from[kind] = ""
            log.info("%s watch in %s expired (410 Gone); listing again", kind, self.namespace)
        return 0

    async def _resync_checks(self, kind: str, list_fn: Callable[..., Any]) -> int:
        """Beside the open watch, a consistent LIST once RESYNC_SECONDS pass with nothing showing the watch
        current (``WatchCurrency``): returns how many objects it shows otherwise than the cache when the
        watch has not delivered them LAG_GRACE_SECONDS later (the round then ends, and the hub lists and
        watches again). An object the watch changed since the LIST was sent is the watch's to tell (the
        LIST may be older than its event); one the LIST shows otherwise and the watch then delivers was on
        its way."""
        while True:
            period = RESYNC_SECONDS * random.uniform(0.9, 1.1)
            while (wait := self.currency.due_in(kind, period)) > 0:  # later while events show it current
                await asyncio.sleep(wait)
            touched = self._touched[kind] = set()
            sent = time.monotonic()
            try:
                items, _ = await self._list_capped(kind, list_fn)
                self.lists += 1
                self.kind_failures.listed(kind)
                suspects = self._differs(kind, items) - touched
                del items
                if suspects:
                    await asyncio.sleep(LAG_GRACE_SECONDS)
                    suspects -= touched
                if not suspects:
                    self.currency.listed(kind, sent)
            finally:
                self._touched.pop(kind, None)
            if suspects:
                return len(suspects)
