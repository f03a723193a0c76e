"""Server-sent event streams for the UI pages, fed by the shared list+watch of Jobs and Workloads per
namespace (the triggers' hub, ``NamespaceWatch``) running in the API server's event loop.

However many browsers watch, a namespace costs one LIST+WATCH of Jobs and one of Workloads in an API server
process, and a Job's panel (or the queue table) is computed once per change for every page that shows it
(``fanout.Feeds``); a change is pushed to each open page within a second, with no read of pods or Events.
A stream sends ``event: part`` (an element of the page and its new HTML), ``reload`` (the page is out of
date: a newer Job exists) or ``end`` (nothing more will change), and a comment every ``HEARTBEAT_SECONDS``
so proxies keep the connection open and a closed tab is noticed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, suppress
from datetime import UTC, datetime
from typing import Any

from ..kueue.progress.eta import FinishClock
from ..watch.namespace_watch import ANY_JOB, Following, NamespaceWatch
from .fanout import Feeds, Publish

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 15.0
MIN_GAP_SECONDS = 1.0
"""At most one update a second per stream: a burst of changes is one update (the hub keeps the newest)."""
QUEUE_REFRESH_SECONDS = 30.0
"""The queue table is read again at least this often: other teams' Workloads in a ClusterQueue change its
usage without a change of any Job the hub follows."""
MAX_WATCHED_NAMESPACES = 50
"""The queue page follows at most this many namespaces' watches (two each); beyond, the periodic read alone
keeps it current. Set ``[kueue] ui_namespaces`` to choose them."""
RETRY_MILLISECONDS = 5000
"""A stream that has nothing to follow yet (no Job) closes and asks the browser to come back after this."""
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no buffering proxy in between

Render = Callable[
    [dict[str, Any], "dict[str, Any] | None", float, FinishClock], tuple[Mapping[str, str], bool]
]
"""(Job, Workload, now, clock) -> (HTML by part, finished); it records the Job's finished indexes in the
clock, which lives as long as the stream."""


def event(name: str, data: Mapping[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def retry_later() -> str:
    return f"retry: {RETRY_MILLISECONDS}\n\n"


def _stamp() -> str:
    return f"{datetime.now(UTC):%H:%M:%S} UTC"


FEEDS = Feeds()
"""The Jobs and queue tables followed in this API server process, each computed once for all its streams."""


async def job_events(
    conn_id: str, namespace: str, job_name: str, render: Render, disconnected: Callable[[], Awaitable[bool]]
) -> AsyncIterator[str]:
    """The parts of one Job's panel after each change, until the Job finishes or goes. Every stream of the
    same Job reads one feed: the panel is rendered once per change, in a worker thread (a 100,000-index
    grid takes hundreds of milliseconds), not once per stream on the event loop."""

    async def produce(publish: Publish) -> None:
        await _job_feed(conn_id, namespace, job_name, render, publish)

    async for chunk in FEEDS.follow(
        ("job", conn_id, namespace, job_name), produce, HEARTBEAT_SECONDS, disconnected
    ):
        yield chunk


async def _job_feed(conn_id: str, namespace: str, job_name: str, render: Render, publish: Publish) -> None:
    """A watch that cannot go on (no right to watch, the cluster away for good) ends the streams with the
    reason: the browser would otherwise reconnect every few seconds and fail the same way."""
    clock: FinishClock | None = None
    try:
        async with NamespaceWatch.follow(conn_id, namespace, job_name) as following:
            while True:
                snapshot = await following.next()
                if snapshot.obj is None:
                    publish([event("end", {"reason": f"Job {namespace}/{job_name} is gone"})], True)
                    return
                if clock is None:
                    clock = FinishClock(int((snapshot.obj.get("spec") or {}).get("completions") or 0))
                parts, done = await asyncio.to_thread(
                    render, snapshot.obj, snapshot.workload, time.time(), clock
                )
                stamp = _stamp()
                chunks = [
                    event("part", {"part": part, "html": html, "at": stamp}) for part, html in parts.items()
                ]
                if done:
                    chunks.append(event("end", {"reason": "finished"}))
                publish(chunks, done)
                if done:
                    return
                await asyncio.sleep(MIN_GAP_SECONDS)
    except Exception as exc:
        log.warning("live view of Job %s/%s stopped: %s", namespace, job_name, exc)
        publish(
            [event("end", {"reason": f"live updates stopped ({type(exc).__name__}); reload the page"})], True
        )


async def queue_events(
    conn_id: str,
    namespaces: list[str],
    read_html: Callable[[], Awaitable[str]],
    disconnected: Callable[[], Awaitable[bool]],
) -> AsyncIterator[str]:
    """The queue table again whenever a Job or Workload of ``namespaces`` changes (admitted, evicted,
    finished), and at least every QUEUE_REFRESH_SECONDS; sent only when it differs from the last one. Every
    stream of the same namespaces reads one feed: the table is read once per change, not once per stream."""

    async def produce(publish: Publish) -> None:
        await _queue_feed(conn_id, namespaces, read_html, publish)

    key = ("queues", conn_id, tuple(namespaces))
    async for chunk in FEEDS.follow(key, produce, HEARTBEAT_SECONDS, disconnected):
        yield chunk


async def _queue_feed(
    conn_id: str, namespaces: list[str], read_html: Callable[[], Awaitable[str]], publish: Publish
) -> None:
    changed = asyncio.Event()
    async with AsyncExitStack() as stack:
        pumps = []
        for namespace in namespaces[:MAX_WATCHED_NAMESPACES]:
            following = await stack.enter_async_context(NamespaceWatch.follow(conn_id, namespace, ANY_JOB))
            pumps.append(asyncio.create_task(_pump(following, changed, namespace)))
        try:
            last: str | None = None
            while True:
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(changed.wait(), QUEUE_REFRESH_SECONDS)
                changed.clear()
                html: str | None = last
                try:
                    html = await read_html()
                except Exception as exc:  # the cluster away for a moment: the next change or refresh retries
                    log.warning("queue page: cannot read the queues: %s", exc)
                if html is not None and html != last:
                    publish([event("part", {"part": "queues", "html": html, "at": _stamp()})], False)
                    last = html
                await asyncio.sleep(2 * MIN_GAP_SECONDS)  # two LISTs a read: at most every 2 s
        finally:
            for pump in pumps:
                pump.cancel()
            for pump in pumps:
                with suppress(asyncio.CancelledError, Exception):
                    await pump


async def _pump(following: Following, changed: asyncio.Event, namespace: str) -> None:
    try:
        while True:
            await following.next()
            changed.set()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the hub gave up (no rights in that namespace): the periodic read goes on
        log.warning("queue page: the watch of namespace %s stopped: %s", namespace, exc)
