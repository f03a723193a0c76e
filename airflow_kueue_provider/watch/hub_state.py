"""What one namespace's hub knows of itself besides its objects, and how it ends its followers.

The slots it lists and watches (the kinds every namespace has, and those a follower asked for), whether its
cache is synced, its failures by kind; and the two ways followers end: a kind listed on demand that cannot be
listed ends only that kind's followers (``KindUnavailable``), a fatal failure ends them all (``_give_up``).
``NamespaceWatch`` (the loop and the hubs' registry) is built on it.
"""

from __future__ import annotations

import asyncio
import logging

from ..hooks.kueue_async_hook import api_status
from ..hooks.retry import describe
from ..kueue.errors import KueueProviderError
from ..kueue.kinds import by_plural, kinds
from .cache import WORKLOADS, NamespaceCache
from .caps import configured_caps
from .kind_failures import KindFailures, WatchUnavailable
from .pending_reads import SharedPendingReads

log = logging.getLogger(__name__)

OPTIONAL_KIND_FATAL_STATUSES = frozenset({403, 404})
"""A kind listed on demand (a JobSet) not served (no CRD) or not allowed (RBAC): fatal to that kind's
followers at once, to no other."""


def base_slots() -> frozenset[str]:
    """What every hub lists and watches: the kinds every namespace has (Jobs: every kind's children) and
    the Workloads."""
    return frozenset({k.api.plural for k in kinds() if k.always_watched} | {WORKLOADS})


class KindUnavailable(RuntimeError, KueueProviderError):
    """The hub cannot list a kind it lists on demand (JobSets) in its namespace; only that kind's followers
    end, with this."""


class HubState(NamespaceCache):
    """One hub's slots, sync and failures, and ending its followers; the objects are kept by
    :class:`NamespaceCache`."""

    def __init__(self, namespace: str) -> None:
        super().__init__(configured_caps())
        self.namespace = namespace
        self.on_demand: set[str] = set()  # the slots of kinds a follower asked for (JobSets)
        self.kind_errors: dict[str, BaseException] = {}  # why a kind cannot be followed here, by slot
        self._kinds_changed = asyncio.Event()
        self.synced = asyncio.Event()
        self.error: BaseException | None = None
        self._synced_kinds: set[str] = set()
        self.kind_failures = KindFailures()  # consecutive broken rounds per kind; its LIST resets it
        self.lists = 0  # LISTs made so far (every slot): each one a fresh, trusted view
        self.events: dict[str, int] = {}  # watch events per slot, bookmarks too
        self.pending_reads = SharedPendingReads()  # queue positions: one read per LocalQueue, all followers

    @property
    def failures(self) -> int:
        """The longest run of consecutive failures of one kind (what the diagnostics show)."""
        return self.kind_failures.worst

    @property
    def kinds(self) -> frozenset[str]:
        """The slots the hub lists and watches: Jobs and Workloads, and another kind once one of its followers
        asked (a cluster without the JobSet CRD is never asked for JobSets)."""
        return base_slots() | self.on_demand

    def _mark_unsynced(self) -> None:
        """Until the next LIST the cache may lack changes: followers that ask now wait for it."""
        self.synced.clear()
        self._synced_kinds.clear()

    def _leave_registry(self) -> None:
        """Stop being the hub new followers join (the registry's part of giving up)."""

    def _give_up(self, error: WatchUnavailable, cause: BaseException | None = None) -> None:
        """End every follower with ``error``, drop the cache and leave the registry, so the next follower
        starts afresh."""
        if cause is not None:
            error.__cause__ = cause
        self.error = error
        self._clear()
        log.error("watch of namespace %s gave up: %s", self.namespace, error)
        self._leave_registry()
        self.synced.set()
        self._wake()

    def _on_demand_kind_failed(self, exc: BaseException) -> bool:
        """A LIST or WATCH of a kind listed on demand refused for good (no CRD, no RBAC): stop watching it and
        end only its followers, naming the fix; the hub goes on with the others."""
        slot = getattr(exc, "watch_kind", None)
        if slot not in self.on_demand or api_status(exc) not in OPTIONAL_KIND_FATAL_STATUSES:
            return False
        kind = by_plural(slot)
        assert kind is not None
        self._mark_unsynced()
        self.on_demand.discard(slot)
        self.kind_errors[slot] = error = KindUnavailable(
            f"{kind.kind}s cannot be listed in namespace {self.namespace} ({describe(exc)}): install the "
            f"{kind.kind} controller (its CRD {kind.api.resource}), and let this identity list and watch "
            f"{kind.api.plural} (deploy/rbac/worker-triggerer.yaml)"
        )
        log.error("%s", error)
        for key, group in self.followers.items():
            if key.startswith(kind.follower_prefix):
                for follower in group:
                    follower.changed.set()
        return True
