"""One shared list+watch of Jobs and Workloads (and of any other kind a follower asks for) per (connection,
namespace) in a triggerer process.

Every trigger of a namespace follows its own Job through this hub, so a triggerer with 200 deferred tasks
in one namespace holds two watch connections, not 200 pollers.  The hub keeps the latest Job and Workload
objects; a follower is woken when either changes and always reads the newest state, so bursts are coalesced
and a terminal state is never missed.  After 410 Gone (or any broken watch) the hub lists again.

The cache is trusted only while it is synced: a broken watch marks it unsynced until the next LIST, so a
trigger that joins meanwhile waits instead of reading "no such Job". A watch that goes silent without closing
(a stalled connection, a frozen proxy) is noticed by its read timeout: the apiserver sends a BOOKMARK about
once a minute on an idle watch (60.7 s measured on the local cluster), so WATCH_READ_TIMEOUT (two such
intervals) without a byte means it is dead, and the hub lists again. Beside the open watch the hub LISTs once
RESYNC_SECONDS pass with nothing showing the watch current (``freshness``): a watch can stay open, bookmarks
flowing, while the apiserver's watch cache lags behind etcd, and only a LIST (a consistent read) shows what
it missed; what it shows that the watch does not deliver within LAG_GRACE_SECONDS ends the round. Only
401/403/404 that repeat for one kind with no successful LIST of that kind between them are fatal to the
followers (``kind_failures``: a Workloads 403 is not hidden by Jobs that list fine); a hub that gave up leaves
the registry at once, so the next follower gets a fresh hub, not the stale error, even while old followers
(a UI page) are still joined to the old one. A namespace whose objects pass a cap (``caps``: ``[kueue]
watch_max_objects``, ``watch_max_mib``) ends the same way, with ``NamespaceOverCap``, and drops its cache;
followers that join it within ``OVER_CAP_RETRY_SECONDS`` get that error at once, without a LIST.

This module is the loop and the hubs' registry; the parts it is made of live next to it and are re-exported
here: the cache of objects and followers (``cache``), the hub's slots, sync and failures and how it ends its
followers (``hub_state``), the followers' handles (``following``), the snapshots they read (``snapshots``) and
the SIGUSR2 dump (``diagnostics``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from typing import Any, ClassVar

from ..hooks.cluster_target import ClusterTarget
from ..hooks.kueue_async_hook import AsyncKueueHook, api_status
from ..hooks.retry import describe, retry_after
from ..kueue.errors import KueueProviderError
from ..kueue.kinds import KindDescription, by_plural, child_kind
from .cache import ANY_JOB, WORKLOADS, _Follower, follower_key
from .caps import OVER_CAP_RETRY_SECONDS, NamespaceOverCap
from .diagnostics import DEBUG_SIGNAL_ENV, install_debug_signal
from .following import Following
from .gc_freeze import followers_changed, freeze_once
from .hub_state import OPTIONAL_KIND_FATAL_STATUSES, KindUnavailable
from .kind_failures import FATAL_AFTER, FATAL_STATUSES, WatchUnavailable, is_fatal, unavailable
from .racing import first_done
from .snapshots import KindSnapshot
from .watch_rounds import (
    LAG_GRACE_SECONDS,
    RESYNC_SECONDS,
    WATCH_READ_TIMEOUT,
    WATCH_ROUND_SECONDS,
    WatchRounds,
    WatchStalled,
)

__all__ = [
    "ANY_JOB",
    "DEBUG_SIGNAL_ENV",
    "FATAL_AFTER",
    "FATAL_STATUSES",
    "LAG_GRACE_SECONDS",
    "OPTIONAL_KIND_FATAL_STATUSES",
    "RESYNC_SECONDS",
    "WATCH_READ_TIMEOUT",
    "WATCH_ROUND_SECONDS",
    "Following",
    "KindSnapshot",
    "KindUnavailable",
    "KindsChanged",
    "NamespaceOverCap",
    "NamespaceWatch",
    "WatchLoopEnded",
    "WatchStalled",
    "WatchUnavailable",
    "follower_key",
]

log = logging.getLogger(__name__)


class KindsChanged(Exception):
    """A follower needs a kind the hub does not watch yet (JobSets): list every kind again, at once."""


class NamespaceWatch(WatchRounds):
    """The list+watch loop of one (connection, namespace), shared by every follower of the process; what it
    lists and watches, and how it ends its followers, is kept by :class:`HubState`; its watch rounds and the
    periodic LIST beside them by :class:`WatchRounds`."""

    _hubs: ClassVar[dict[tuple[ClusterTarget, str], NamespaceWatch]] = {}
    _follower_count: ClassVar[int] = 0
    """Followers of every hub of the process (see ``gc_freeze``)."""
    _over_cap: ClassVar[dict[tuple[ClusterTarget, str], tuple[float, NamespaceOverCap]]] = {}
    """Namespaces that went over a cap: when (monotonic) and why, for ``OVER_CAP_RETRY_SECONDS``."""

    def __init__(self, target: ClusterTarget | str, namespace: str) -> None:
        super().__init__(namespace)
        self.target = ClusterTarget.of(target)
        self.conn_id = self.target.conn_id
        self.hook: AsyncKueueHook | None = None  # the open session, lent to followers for one-off reads
        self._task: asyncio.Task[None] | None = None

    # --- following ------------------------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def follow(
        cls, target: ClusterTarget | str, namespace: str, name: str, kind: KindDescription | None = None
    ) -> AsyncIterator[Following]:
        """Follow one object of ``kind`` (a Job by default), its child Jobs and its Workload -- or, with
        ANY_JOB, every change of the namespace. The hub starts watching the kind if it did not."""
        kind = kind or child_kind()
        key = ANY_JOB if name == ANY_JOB else follower_key(kind, name)
        async with cls._joined(target, namespace, key, kind) as (hub, follower):
            yield Following(hub, follower, kind)

    @classmethod
    @asynccontextmanager
    async def _joined(
        cls, target: ClusterTarget | str, namespace: str, key_of_follower: str, kind: KindDescription
    ) -> AsyncIterator[tuple[NamespaceWatch, _Follower]]:
        key = (ClusterTarget.of(target), namespace)
        hub = cls._hubs.get(key)
        recent = cls._over_cap.get(key)
        if recent is not None and time.monotonic() - recent[0] < OVER_CAP_RETRY_SECONDS:
            hub = NamespaceWatch(key[0], namespace)  # not started, not registered: ends its followers
            hub._give_up(recent[1])
        elif (
            hub is None or hub.error is not None
        ):  # a hub that gave up is never joined: a fresh one tries again
            cls._over_cap.pop(key, None)
            hub = cls._hubs[key] = NamespaceWatch(key[0], namespace)
            hub._task = asyncio.get_running_loop().create_task(hub._run(), name=f"kueue-watch-{namespace}")
            if os.environ.get(DEBUG_SIGNAL_ENV):
                install_debug_signal(asyncio.get_running_loop(), lambda: NamespaceWatch._hubs)
        slot = kind.api.plural
        if slot not in hub.kinds:
            hub.on_demand.add(slot)
            hub.kind_errors.pop(slot, None)
            hub._mark_unsynced()  # nobody reads until the kind is listed too
            hub._kinds_changed.set()
        follower = _Follower(key_of_follower)
        hub.followers.setdefault(key_of_follower, set()).add(follower)
        NamespaceWatch._follower_count += 1
        followers_changed(NamespaceWatch._follower_count)
        try:
            yield hub, follower
        finally:
            NamespaceWatch._follower_count -= 1
            hub._unfollow(follower)
            if not hub.followers:
                if cls._hubs.get(key) is hub:
                    del cls._hubs[key]
                await hub._stop()

    # --- the watch loop ---------------------------------------------------------------------------------
    async def _stop(self) -> None:
        if self._task:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                async with AsyncKueueHook(self.target).session() as hook:
                    self.hook = hook
                    self._kinds_changed.clear()
                    loops = [self._list_and_watch(slot, hook) for slot in sorted(self.kinds)]
                    try:
                        await _first_failure(*loops, self._until_kinds_change())
                    finally:
                        self.hook = None
            except asyncio.CancelledError:
                raise
            except KindsChanged:
                self._mark_unsynced()
                continue
            except NamespaceOverCap as exc:
                # Kept for OVER_CAP_RETRY_SECONDS: without its frames, which hold the LIST that was over.
                exc.__traceback__, exc.__context__ = None, None
                NamespaceWatch._over_cap[(self.target, self.namespace)] = (time.monotonic(), exc)
                self._give_up(exc)
                return
            except Exception as exc:
                if self._on_demand_kind_failed(exc):
                    continue  # the other slots are listed again at once, without that kind
                self._mark_unsynced()
                kind, status = getattr(exc, "watch_kind", None), api_status(exc)
                phase = getattr(exc, "watch_phase", "list")
                count = self.kind_failures.failed(kind, phase)
                if is_fatal(status, count):
                    self._give_up(unavailable(kind, status, self.namespace, describe(exc), phase), exc)
                    return
                delay = random.uniform(0, min(30.0, 0.5 * 2**count))
                if api_status(exc) is not None:
                    delay = max(delay, retry_after(exc) or 0.0)
                log.warning(
                    "watch of namespace %s broke (%s); listing again in %.1fs",
                    self.namespace,
                    describe(exc) if str(exc) else type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)

    async def _until_kinds_change(self) -> None:
        await self._kinds_changed.wait()
        raise KindsChanged(f"now also following {sorted(self.on_demand)}")

    def _leave_registry(self) -> None:
        if NamespaceWatch._hubs.get((self.target, self.namespace)) is self:
            del NamespaceWatch._hubs[(self.target, self.namespace)]

    async def _list_and_watch(self, slot: str, hook: AsyncKueueHook) -> None:
        list_fn: Callable[..., Any]
        watch_fn: Callable[..., Any]
        apply: Callable[[str, dict[str, Any]], None]
        if slot == WORKLOADS:
            list_fn, watch_fn, apply = hook.list_workloads, hook.watch_workloads, self._apply_workload
        else:
            kind = by_plural(slot)
            assert kind is not None
            list_fn = functools.partial(hook.list_kind, kind)
            watch_fn = functools.partial(hook.watch_kind, kind)
            apply = functools.partial(self._apply, slot)
        try:
            await self._list_and_watch_rounds(slot, list_fn, watch_fn, apply)
        except Exception as exc:
            exc.watch_kind = slot  # type: ignore[attr-defined]  # which slot failed (_on_demand_kind_failed)
            raise

    async def _list_and_watch_rounds(
        self,
        kind: str,
        list_fn: Callable[..., Any],
        watch_fn: Callable[..., Any],
        apply: Callable[[str, dict[str, Any]], None],
    ) -> None:
        while True:
            sent = time.monotonic()
            items, version = await self._list_capped(kind, list_fn)
            self.currency.listed(kind, sent)
            changed = self._replace(kind, items)
            if changed and kind in self._synced_kinds:
                log.warning(
                    "%s in %s: a periodic LIST found %d change(s) the watch had not delivered (the "
                    "apiserver's watch cache may lag); followers see them now",
                    kind,
                    self.namespace,
                    len(changed),
                )
            self.lists += 1
            self.kind_failures.listed(kind)
            self._synced_kinds.add(kind)
            if self._synced_kinds >= self.kinds:
                self.synced.set()  # wakes the followers waiting for a first (or a fresh) view
                freeze_once(NamespaceWatch._follower_count)
            # Only the followers whose Job or Workload changed: a LIST every RESYNC_SECONDS that woke all
            # 1,000 followers of a triggerer would run them all in one pass of its event loop.
            for name in changed:
                self._wake(name)
            del items, changed
            await self._watch_rounds(kind, version, list_fn, watch_fn, apply)


class WatchLoopEnded(RuntimeError, KueueProviderError):
    """A list+watch loop, which never ends by itself, ended (cancelled from outside): list again."""


async def _first_failure(*loops: Coroutine[Any, Any, None]) -> None:
    """Run the list+watch loops together; when one ends -- they only end by failing -- cancel the others
    and raise its error, so the hub lists both kinds again on a fresh connection. A loop cancelled from
    outside counts as a failure too: a hub with a dead loop would look synced while missing changes."""
    for task in await first_done(*loops):
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    raise WatchLoopEnded("a list+watch loop ended without an error")
