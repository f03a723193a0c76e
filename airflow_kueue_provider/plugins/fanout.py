"""One producer per followed thing, any number of streams reading what it made; and a cap on streams.

A task stream used to render the index grid on the API server's event loop once per stream (350-600 ms for a
fragmented 100,000-index Job), and each queue stream read every namespace on every change: twenty tabs could
starve the API server, which also serves the Execution API. Now a ``Feed`` (one per Job, one per set of
watched namespaces) computes each update once, off the loop, and every stream following it sends that same
text. ``StreamCaps`` bounds the open streams per user and in total (``[kueue] ui_streams_per_user``,
``[kueue] ui_streams_total``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import suppress

from ..hooks.kueue_options import option_count
from ..kueue.errors import KueueProviderError
from .user_slots import UserSlots, Wording

log = logging.getLogger(__name__)

Publish = Callable[[list[str], bool], None]
"""(the chunks of an update, final): what a producer hands every stream."""
Producer = Callable[[Publish], Awaitable[None]]


class Feed:
    """The newest update of one producer, and a wake-up for the streams waiting on it. A stream that joins
    late starts from the newest update (each is whole: the parts it names replace the page's)."""

    def __init__(self) -> None:
        self.version = 0
        self.chunks: list[str] = []
        self.final = False
        self.readers = 0
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    def publish(self, chunks: list[str], final: bool) -> None:
        self.version += 1
        self.chunks, self.final = chunks, final
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def updates(
        self, heartbeat: float, disconnected: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[str]:
        """The chunks of each update from now on (the newest first), a keep-alive comment every
        ``heartbeat`` seconds without one; ends after the final update or when the client went."""
        seen = 0
        while True:
            if self.version > seen:
                seen = self.version
                for chunk in self.chunks:
                    yield chunk
                if self.final:
                    return
                continue
            try:
                await asyncio.wait_for(self._changed.wait(), heartbeat)
            except TimeoutError:
                if await disconnected():
                    return
                yield ": keep-alive\n\n"


class Feeds:
    """The live feeds of this process by key; a feed's producer runs while a stream reads it."""

    def __init__(self) -> None:
        self._feeds: dict[Hashable, Feed] = {}

    def __len__(self) -> int:
        return len(self._feeds)

    async def follow(
        self,
        key: Hashable,
        producer: Producer,
        heartbeat: float,
        disconnected: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[str]:
        """The updates of the feed of ``key``, started with ``producer`` by its first stream and stopped
        when its last stream goes. A feed whose producer ended leaves the table (its streams still get
        its last update): the next stream starts afresh rather than inherit a stale end."""
        feed = self._feeds.get(key)
        if feed is None or feed.task is None or feed.task.done():
            feed = self._feeds[key] = Feed()
            feed.task = asyncio.create_task(self._run(key, feed, producer))
        feed.readers += 1
        try:
            async for chunk in feed.updates(heartbeat, disconnected):
                yield chunk
        finally:
            feed.readers -= 1
            if feed.readers == 0 and feed.task is not None:
                feed.task.cancel()
                if self._feeds.get(key) is feed:
                    del self._feeds[key]

    async def _run(self, key: Hashable, feed: Feed, producer: Producer) -> None:
        try:
            await producer(feed.publish)
        except Exception:  # a producer says why in its own final update; this only frees the streams
            log.warning("live feed %s stopped", key, exc_info=True)
            feed.publish([], True)
        finally:
            if self._feeds.get(key) is feed:
                del self._feeds[key]


class TooManyStreams(KueueProviderError):
    """A new live stream would pass ``[kueue] ui_streams_per_user`` or ``ui_streams_total``."""


class StreamCaps:
    """How many live streams may be open per user and in this API server process (``UserSlots``)."""

    def __init__(self, per_user: int, total: int) -> None:
        wording = Wording(
            "live Kueue streams", "open", "close a Kueue tab", "try again later", TooManyStreams
        )
        self.slots = UserSlots(per_user, total, ("ui_streams_per_user", "ui_streams_total"), wording)
        self.per_user, self.total = per_user, total

    @property
    def open_total(self) -> int:
        return self.slots.taken_total

    def open_for(self, user: str) -> int:
        return self.slots.taken(user)

    def acquire(self, user: str) -> Callable[[], None]:
        """Count one more stream of ``user`` and return its release (idempotent), or raise
        ``TooManyStreams`` saying how many are open and which option raises the cap."""
        return self.slots.acquire(user)

    def hold(self, user: str, body: AsyncIterator[str]) -> AsyncIterator[str]:
        """``body`` counted as one stream of ``user`` until it ends, is closed, or is dropped unstarted."""
        release = self.acquire(user)

        async def held() -> AsyncIterator[str]:
            try:
                async for chunk in body:
                    yield chunk
            finally:
                release()
                with suppress(Exception):
                    await body.aclose()  # type: ignore[attr-defined]

        stream = held()
        weakref.finalize(stream, release)  # a response never sent still gives its slot back
        return stream


def configured_caps() -> StreamCaps:
    """The caps from ``[kueue]`` through the provider's one typed reader (the config file and the environment
    at exec: ``AIRFLOW__KUEUE__UI_STREAMS_PER_USER`` and ``..._TOTAL``; a bad value names its option)."""
    return StreamCaps(per_user=option_count("ui_streams_per_user"), total=option_count("ui_streams_total"))
