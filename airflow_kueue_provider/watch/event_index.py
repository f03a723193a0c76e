"""The Events of Jobs and Workloads for the UI's pages, from one LIST+WATCH per (connection, namespace,
kind) in the API server instead of a field-selected LIST per page read.

Why: at a night's peak a namespace holds about 10,000 Events, most of them its pods', and the apiserver
filters every one of them for each field-selected LIST; the task page's two such LISTs (its Job's and its
Workload's) were its slowest reads at the peak, 160-210 ms each (docs/benchmarks.md). A WATCH filtered by
kind costs the apiserver one match per new Event.

What a feed keeps, and its bounds: per object (by uid, never by name), the fields the timeline reads of
its Events, without the reasons the timeline leaves out (one per pod: ``skip_reasons``, filtered by the
apiserver), at most ``MAX_PER_OBJECT`` (the newest) and ``MAX_PER_FEED`` in all. A feed past its bound stops
and its namespace's pages read with a LIST again for ``OVER_BOUND_RETRY_SECONDS``: only the namespace whose
Events flooded pays. At most ``MAX_FEEDS`` feeds; pages beyond read with a LIST. A feed no page read for
``IDLE_SECONDS`` stops at the end of its watch round. A feed answers only while it is current: before its
first LIST and from a broken watch until it has listed again, pages read with a LIST.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..hooks.retry import backoff_delays, describe, retry_after
from ..kueue.errors import KueueProviderError

log = logging.getLogger(__name__)

MAX_FEEDS = 16
"""Feeds per API server process: two per namespace the pages show (Jobs and Workloads)."""
MAX_PER_FEED = 10_000
"""Events one feed keeps: a Job or Workload has a handful once the per-pod reasons are left out."""
MAX_PER_OBJECT = 100
"""Events kept per object, the newest (an Event repeated is one Event with a count)."""
MAX_MESSAGE_CHARS = 1_000
WATCH_ROUND_SECONDS = 300
"""Each watch round ends after this, and the feed lists again (a LIST is a consistent read)."""
IDLE_SECONDS = 900.0
OVER_BOUND_RETRY_SECONDS = 600.0
KEPT_FIELDS = ("reason", "message", "count", "type", "lastTimestamp", "eventTime", "firstTimestamp")

Key = tuple[str, str, str]  # (connection, namespace, involved kind)


class EventSource(Protocol):
    """The calls a feed makes (``KueueHook``: ``hooks.sync_events``)."""

    kubernetes_conn_id: str

    def events_of(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]: ...

    def kind_events(
        self, namespace: str, kind: str, skip_reasons: Iterable[str] = (), limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str, bool]: ...

    def watch_kind_events(
        self, namespace: str, kind: str, resource_version: str, seconds: int, skip_reasons: Iterable[str] = ()
    ) -> Iterator[dict[str, Any]]: ...


class _OverBound(RuntimeError, KueueProviderError):
    """A feed holds more than ``MAX_PER_FEED`` Events: it stops."""


class _Gone(RuntimeError, KueueProviderError):
    """The WATCH's version is too old (410): the feed lists again."""


def slim(event: Mapping[str, Any]) -> dict[str, Any]:
    """What the timeline reads of an Event (``plugins.views.admission_timeline``)."""
    kept = {name: event[name] for name in KEPT_FIELDS if event.get(name) is not None}
    if isinstance(kept.get("message"), str):
        kept["message"] = kept["message"][:MAX_MESSAGE_CHARS]
    kind = (event.get("involvedObject") or {}).get("kind")
    return kept | {"involvedObject": {"kind": kind}}


@dataclass
class _Feed:
    """One (connection, namespace, kind)'s Events, by involved object uid then Event uid."""

    source: EventSource
    namespace: str
    kind: str
    skip_reasons: tuple[str, ...]
    read_at: float
    synced: bool = False
    over_bound: bool = False
    stopped: bool = False
    by_object: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    count: int = 0

    def of(self, uid: str) -> list[dict[str, Any]] | None:
        """The object's Events, or None while the feed is not current."""
        if not self.synced:
            return None
        return list((self.by_object.get(uid) or {}).values())

    def load(self, items: Iterable[Mapping[str, Any]]) -> None:
        fresh: dict[str, dict[str, dict[str, Any]]] = {}
        count = 0
        for event in items:
            count += _put(fresh, event)
            if count > MAX_PER_FEED:
                raise _OverBound
        self.by_object, self.count = fresh, count

    def apply(self, change: Mapping[str, Any]) -> None:
        """One WATCH entry (a BOOKMARK changes nothing: each round ends with a LIST)."""
        kind, event = change.get("type"), change.get("object") or {}
        if kind == "ERROR":
            raise _Gone(str(event.get("message") or event))
        meta = event.get("metadata") or {}
        if kind == "DELETED":
            held = self.by_object.get(str((event.get("involvedObject") or {}).get("uid") or ""))
            if held is not None and held.pop(str(meta.get("uid") or ""), None) is not None:
                self.count -= 1
        elif kind in ("ADDED", "MODIFIED"):
            self.count += _put(self.by_object, event)
            if self.count > MAX_PER_FEED:
                raise _OverBound


def _put(by_object: dict[str, dict[str, dict[str, Any]]], event: Mapping[str, Any]) -> int:
    """Keep ``event`` under its object's uid; how many more Events that makes (0 or 1; 0 when the object's
    oldest made way)."""
    owner = str((event.get("involvedObject") or {}).get("uid") or "")
    uid = str((event.get("metadata") or {}).get("uid") or "")
    if not owner or not uid:
        return 0
    held = by_object.setdefault(owner, {})
    added = 0 if uid in held else 1
    held[uid] = slim(event)
    if len(held) > MAX_PER_OBJECT:
        del held[next(iter(held))]
        added = 0
    return added


class EventIndex:
    """Thread-safe: the UI's routes run in the API server's thread pool; each feed has its own thread."""

    def __init__(
        self,
        skip_reasons: Iterable[str] = (),
        max_feeds: int = MAX_FEEDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._skip = tuple(sorted(skip_reasons))
        self._max_feeds = max_feeds
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._feeds: dict[Key, _Feed] = {}
        self._over_until: dict[Key, float] = {}
        self.lists = 0  # direct LISTs the pages made, for tests

    def events_of(
        self, source: EventSource, namespace: str, kind: str, name: str, uid: str
    ) -> list[dict[str, Any]]:
        """The Events of the ``kind`` object ``name`` whose uid is ``uid``: from the namespace's feed when it
        is current (it is started on first use), else a LIST of the object's Events (by name: those of
        another object once of that name are left out)."""
        key = (source.kubernetes_conn_id, namespace, kind)
        with self._lock:
            feed = self._feed(key, source) if uid else None
            found = None if feed is None else feed.of(uid)
            if found is None:
                self.lists += 1
        if found is not None:
            return found
        listed = source.events_of(namespace, kind, name)
        return [e for e in listed if not uid or (e.get("involvedObject") or {}).get("uid") in (uid, None)]

    def current(self, conn_id: str, namespace: str, kind: str) -> bool:
        """Whether pages read that namespace's Events of ``kind`` from memory now."""
        with self._lock:
            feed = self._feeds.get((conn_id, namespace, kind))
            return feed is not None and feed.synced

    def _feed(self, key: Key, source: EventSource) -> _Feed | None:
        now = self._clock()
        feed = self._feeds.get(key)
        if feed is not None and not feed.stopped:
            feed.read_at = now
            return feed
        if self._over_until.get(key, 0.0) > now or (feed is None and len(self._feeds) >= self._max_feeds):
            return None
        self._over_until.pop(key, None)
        feed = _Feed(source, key[1], key[2], self._skip, now)
        self._feeds[key] = feed
        threading.Thread(
            target=self._run, args=(key, feed), name=f"kueue-events-{key[1]}", daemon=True
        ).start()
        return feed

    def _run(self, key: Key, feed: _Feed) -> None:
        failures = 0
        try:
            while self._clock() - feed.read_at < IDLE_SECONDS:
                try:
                    self._list_and_watch(feed)
                    failures = 0
                except _OverBound:
                    log.warning(
                        "UI: the %s Events of namespace %s pass %d: its pages LIST them for %.0f s",
                        feed.kind,
                        feed.namespace,
                        MAX_PER_FEED,
                        OVER_BOUND_RETRY_SECONDS,
                    )
                    with self._lock:
                        self._over_until[key] = self._clock() + OVER_BOUND_RETRY_SECONDS
                    return
                except Exception as exc:  # a broken watch or an API fault: list again, after a backoff
                    with self._lock:
                        feed.synced = False
                    failures += 1
                    delay = retry_after(exc) or backoff_delays(2, base=min(30.0, 2.0**failures))[0]
                    what = f"{feed.namespace}/{feed.kind}"
                    log.info(
                        "UI: the Events feed of %s broke (%s); again in %.1f s", what, describe(exc), delay
                    )
                    self._sleep(delay)
        finally:
            with self._lock:
                feed.synced, feed.stopped = False, True
                feed.by_object, feed.count = {}, 0
                if self._feeds.get(key) is feed:
                    del self._feeds[key]

    def _list_and_watch(self, feed: _Feed) -> None:
        # One page, one more than the bound: a namespace flooded with Events is not read whole.
        items, version, more = feed.source.kind_events(
            feed.namespace, feed.kind, self._skip, MAX_PER_FEED + 1
        )
        if more:
            raise _OverBound
        with self._lock:
            feed.load(items)
            feed.synced = True
        try:
            changes = feed.source.watch_kind_events(
                feed.namespace, feed.kind, version, WATCH_ROUND_SECONDS, self._skip
            )
            for change in changes:
                with self._lock:
                    feed.apply(change)
        except _Gone:
            return  # the version is too old: list again
