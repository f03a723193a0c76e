"""One shared list+watch of Jobs and Workloads per (connection, namespace) in a triggerer process.

Every trigger of a namespace follows its own Job through this hub, so a triggerer with 200 deferred tasks
in one namespace holds two watch connections, not 200 pollers.  The hub keeps the latest Job and Workload
objects; a follower is woken when either changes and always reads the newest state, so bursts are coalesced
and a terminal state is never missed.  After 410 Gone (or any broken watch) the hub lists again.

The cache is trusted only while it is synced: a broken watch marks it unsynced until the next LIST, so a
trigger that joins meanwhile waits instead of reading "no such Job". A watch that goes silent without closing
(a stalled connection, a frozen proxy) is noticed by its read timeout: the apiserver sends a BOOKMARK about
once a minute on an idle watch (60.7 s measured on the local cluster), so WATCH_READ_TIMEOUT (two such
intervals) without a byte means it is dead, and the hub lists again. Every watch round also ends after
about RESYNC_SECONDS, and the hub lists again: a watch can stay open, bookmarks flowing, while the
apiserver's watch cache lags behind etcd, and only a LIST (a consistent read) shows what it missed. Only
401/403/404 that repeat with no successful LIST between them are fatal to the followers.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import random
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from ..hooks.kueue_async_hook import AsyncKueueHook, api_status, is_connection_error
from ..hooks.retry import describe, retry_after
from ..kueue.jobset import workload_owner_uid
from ..kueue.names import JOB_UID_LABEL, JOBSET_NAME_LABEL
from .gc_freeze import followers_changed, freeze_once

log = logging.getLogger(__name__)
T = TypeVar("T")
S = TypeVar("S")

# Each watch round asks the apiserver to end it after about RESYNC_SECONDS; the hub then LISTs again. A LIST
# is the safety net against a watch that stays open, gets its bookmarks, yet misses changes: seen here under
# CPU starvation, an apiserver whose watch cache stopped following etcd for minutes (the Job had finished,
# a GET showed it, the watch delivered nothing). Cost: two LISTs per namespace per period, not per Job.
RESYNC_SECONDS = 120.0
WATCH_READ_TIMEOUT = 120.0  # no byte for 2 bookmark intervals (the apiserver sends one every ~60 s): dead
FATAL_STATUSES = frozenset({401, 403, 404})
FATAL_AFTER = 3  # consecutive failures with a fatal status, without a successful LIST between them
ANY_JOB = ""
"""The follower key of one that wakes on a change of any Job or Workload of the namespace (no Job is named
""): the UI's queue page, which redraws when a Job of the namespace is admitted, evicted or finishes."""
DEBUG_SIGNAL_ENV = "AIRFLOW_KUEUE_DEBUG_SIGNAL"  # set: SIGUSR2 logs every hub's state and asyncio task
BASE_KINDS = frozenset({"jobs", "workloads"})
JOBSET_KEY_PREFIX = "jobset/"
"""Follower keys of JobSets: ``jobset/<name>`` (a Job name never has a ``/``)."""


def jobset_key(name: str) -> str:
    return JOBSET_KEY_PREFIX + name


JOBSET_FATAL_STATUSES = frozenset({403, 404})
"""JobSets not served (no CRD) or not allowed (RBAC): fatal to the JobSet followers at once, to no other."""


class JobSetsUnavailable(RuntimeError):
    """The hub cannot list JobSets in its namespace; only its JobSet followers end, with this."""


class KindsChanged(Exception):
    """A follower needs a kind the hub does not watch yet (JobSets): list every kind again, at once."""


class WatchStalled(RuntimeError):
    """A watch connection stayed open but delivered nothing, not even the apiserver's periodic bookmark."""


@dataclass(frozen=True)
class JobSnapshot:
    job: dict[str, Any] | None
    workload: dict[str, Any] | None


@dataclass(frozen=True)
class JobSetSnapshot:
    jobset: dict[str, Any] | None
    jobs: tuple[dict[str, Any], ...]
    """Its child Jobs (the JobSet controller's ``jobset.sigs.k8s.io/jobset-name`` label)."""
    workload: dict[str, Any] | None


@dataclass(eq=False)
class _Follower:
    job_name: str
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class NamespaceWatch:
    _hubs: ClassVar[dict[tuple[str, str], NamespaceWatch]] = {}
    _follower_count: ClassVar[int] = 0
    """Followers of every hub of the process (see ``gc_freeze``)."""

    def __init__(self, conn_id: str, namespace: str) -> None:
        self.conn_id = conn_id
        self.namespace = namespace
        self.jobs: dict[str, dict[str, Any]] = {}
        self.workloads: dict[str, dict[str, Any]] = {}  # by the job-uid label
        self._names_by_uid: dict[str, str] = {}
        self.jobsets: dict[str, dict[str, Any]] = {}  # only once a JobSet follower joined (watch_jobsets)
        self._jobset_names_by_uid: dict[str, str] = {}
        self.watch_jobsets = False
        self.jobsets_error: BaseException | None = None  # why JobSets cannot be followed here
        self._kinds_changed = asyncio.Event()
        self.followers: dict[str, set[_Follower]] = {}
        self.synced = asyncio.Event()
        self.error: BaseException | None = None
        self.hook: AsyncKueueHook | None = None  # the open session, lent to followers for one-off reads
        self._synced_kinds: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self.failures = 0  # consecutive broken rounds; a successful LIST resets it
        self.lists = 0  # LISTs made so far (both kinds): each one a fresh, trusted view
        self.events: dict[str, int] = {"jobs": 0, "workloads": 0, "jobsets": 0}  # watch events, bookmarks too

    @property
    def kinds(self) -> frozenset[str]:
        """What the hub lists and watches: Jobs and Workloads, and JobSets once a JobSet follower asked (a
        cluster without the JobSet CRD is never asked for them)."""
        return BASE_KINDS | {"jobsets"} if self.watch_jobsets else BASE_KINDS

    # --- following ------------------------------------------------------------------------------------
    @classmethod
    @asynccontextmanager
    async def follow(cls, conn_id: str, namespace: str, job_name: str) -> AsyncIterator[Following]:
        """Follow one Job (or, with ANY_JOB, every change of the namespace)."""
        async with cls._joined(conn_id, namespace, job_name) as (hub, follower):
            yield Following(hub, follower)

    @classmethod
    @asynccontextmanager
    async def follow_jobset(cls, conn_id: str, namespace: str, name: str) -> AsyncIterator[FollowingJobSet]:
        """Follow one JobSet, its Jobs and its Workload; the hub starts watching JobSets if it did not."""
        async with cls._joined(conn_id, namespace, jobset_key(name), jobsets=True) as (hub, follower):
            yield FollowingJobSet(hub, follower)

    @classmethod
    @asynccontextmanager
    async def _joined(
        cls, conn_id: str, namespace: str, follower_key: str, jobsets: bool = False
    ) -> AsyncIterator[tuple[NamespaceWatch, _Follower]]:
        key = (conn_id, namespace)
        hub = cls._hubs.get(key)
        if hub is None:
            hub = cls._hubs[key] = NamespaceWatch(conn_id, namespace)
            hub._task = asyncio.get_running_loop().create_task(hub._run(), name=f"kueue-watch-{namespace}")
            if os.environ.get(DEBUG_SIGNAL_ENV):
                _install_debug_signal(asyncio.get_running_loop())
        if jobsets and not hub.watch_jobsets:
            hub.watch_jobsets, hub.jobsets_error = True, None
            hub._mark_unsynced()  # nobody reads until JobSets are listed too
            hub._kinds_changed.set()
        follower = _Follower(follower_key)
        hub.followers.setdefault(follower_key, set()).add(follower)
        NamespaceWatch._follower_count += 1
        followers_changed(NamespaceWatch._follower_count)
        try:
            yield hub, follower
        finally:
            NamespaceWatch._follower_count -= 1
            hub._unfollow(follower)
            if not hub.followers and cls._hubs.get(key) is hub:
                del cls._hubs[key]
                await hub._stop()

    def _unfollow(self, follower: _Follower) -> None:
        group = self.followers.get(follower.job_name, set())
        group.discard(follower)
        if not group:
            self.followers.pop(follower.job_name, None)

    def snapshot(self, job_name: str) -> JobSnapshot:
        """The Job and its Workload -- for a JobSet's Job, the JobSet's Workload (Kueue admits it whole)."""
        job = self.jobs.get(job_name)
        uid = workload_owner_uid(job) if job else None
        return JobSnapshot(job, self.workloads.get(uid) if uid else None)

    def jobset_snapshot(self, name: str) -> JobSetSnapshot:
        jobset = self.jobsets.get(name)
        uid = (jobset or {}).get("metadata", {}).get("uid")
        children = tuple(j for j in self.jobs.values() if _jobset_of(j) == name)
        return JobSetSnapshot(jobset, children, self.workloads.get(uid) if uid else None)

    def _wake(self, job_name: str | None = None) -> None:
        if job_name is None:
            groups = list(self.followers.values())
        else:
            groups = [self.followers.get(job_name, set()), self.followers.get(ANY_JOB, set())]
        for group in groups:
            for follower in group:
                follower.changed.set()

    # --- the watch loop ---------------------------------------------------------------------------------
    async def _stop(self) -> None:
        if self._task:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                async with AsyncKueueHook(self.conn_id).session() as hook:
                    self.hook = hook
                    self._kinds_changed.clear()
                    loops = [
                        self._list_and_watch("jobs", hook.list_jobs, hook.watch_jobs, self._apply_job),
                        self._list_and_watch(
                            "workloads", hook.list_workloads, hook.watch_workloads, self._apply_workload
                        ),
                        self._until_kinds_change(),
                    ]
                    if self.watch_jobsets:
                        loops.append(
                            self._list_and_watch(
                                "jobsets", hook.list_jobsets, hook.watch_jobsets, self._apply_jobset
                            )
                        )
                    try:
                        await _first_failure(*loops)
                    finally:
                        self.hook = None
            except asyncio.CancelledError:
                raise
            except KindsChanged:
                self._mark_unsynced()
                continue
            except Exception as exc:
                if self._jobsets_failed(exc):
                    continue  # the Jobs and Workloads are listed again at once, without JobSets
                self._mark_unsynced()
                self.failures += 1
                fatal = api_status(exc) in FATAL_STATUSES
                if fatal and self.failures >= FATAL_AFTER:
                    self.error = exc
                    self.synced.set()
                    self._wake()
                    return
                delay = random.uniform(0, min(30.0, 0.5 * 2**self.failures))
                if api_status(exc) is not None:
                    delay = max(delay, retry_after(exc) or 0.0)
                log.warning(
                    "watch of namespace %s broke (%s); listing again in %.1fs",
                    self.namespace,
                    describe(exc) if str(exc) else type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)

    def _jobsets_failed(self, exc: BaseException) -> bool:
        """A JobSet LIST or WATCH refused for good (no CRD, no RBAC): stop watching JobSets and end only the
        JobSet followers, naming the fix; the hub goes on with Jobs and Workloads."""
        if getattr(exc, "watch_kind", None) != "jobsets" or api_status(exc) not in JOBSET_FATAL_STATUSES:
            return False
        self._mark_unsynced()
        self.watch_jobsets = False
        self.jobsets_error = JobSetsUnavailable(
            f"JobSets cannot be listed in namespace {self.namespace} ({describe(exc)}): install the JobSet "
            "controller (its CRD jobsets.jobset.x-k8s.io), and let this identity list and watch jobsets "
            "(deploy/rbac/worker-triggerer.yaml)"
        )
        log.error("%s", self.jobsets_error)
        for key, group in self.followers.items():
            if key.startswith(JOBSET_KEY_PREFIX):
                for follower in group:
                    follower.changed.set()
        return True

    async def _until_kinds_change(self) -> None:
        await self._kinds_changed.wait()
        raise KindsChanged("JobSets are followed now")

    def _mark_unsynced(self) -> None:
        """Until the next LIST the cache may lack changes: followers that ask now wait for it."""
        self.synced.clear()
        self._synced_kinds.clear()

    async def _list_and_watch(
        self,
        kind: str,
        list_fn: Callable[..., Any],
        watch_fn: Callable[..., Any],
        apply: Callable[[str, dict[str, Any]], None],
    ) -> None:
        try:
            await self._list_and_watch_rounds(kind, list_fn, watch_fn, apply)
        except Exception as exc:
            exc.watch_kind = kind  # type: ignore[attr-defined]  # which kind failed (see _jobsets_failed)
            raise

    async def _list_and_watch_rounds(
        self,
        kind: str,
        list_fn: Callable[..., Any],
        watch_fn: Callable[..., Any],
        apply: Callable[[str, dict[str, Any]], None],
    ) -> None:
        while True:
            items, version = await list_fn(self.namespace)
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
            self.failures = 0
            self._synced_kinds.add(kind)
            if self._synced_kinds >= self.kinds:
                self.synced.set()  # wakes the followers waiting for a first (or a fresh) view
                freeze_once(NamespaceWatch._follower_count)
            # Only the followers whose Job or Workload changed: a LIST every RESYNC_SECONDS that woke all
            # 1,000 followers of a triggerer would run them all in one pass of its event loop.
            for name in changed:
                self._wake(name)
            try:  # one round: the server ends it after about RESYNC_SECONDS, then the loop LISTs again
                round_seconds = int(RESYNC_SECONDS * random.uniform(0.9, 1.1))
                events = watch_fn(self.namespace, version, round_seconds, WATCH_READ_TIMEOUT)
                async for event_type, obj in events:
                    self.events[kind] += 1
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event_type != "BOOKMARK":
                        apply(event_type, obj)
            except asyncio.TimeoutError as exc:
                raise WatchStalled(
                    f"no byte on the {kind} watch for {WATCH_READ_TIMEOUT:.0f}s (not even a bookmark)"
                ) from exc
            except Exception as exc:
                if api_status(exc) != 410:
                    raise
                log.info("%s watch in %s expired (410 Gone); listing again", kind, self.namespace)

    def _replace(self, kind: str, items: list[dict[str, Any]]) -> set[str]:
        """Take a LIST as the cache; returns the names of the Jobs whose object of this kind differs from
        what the cache held (changes the watch had not delivered, when the cache was in sync)."""
        before = {"jobs": self.jobs, "workloads": self.workloads, "jobsets": self.jobsets}[kind]
        known = {key: o["metadata"].get("resourceVersion") for key, o in before.items()}
        items = [_slim(item) for item in items]
        if kind == "jobsets":
            self.jobsets = {js["metadata"]["name"]: js for js in items}
            self._jobset_names_by_uid = {js["metadata"]["uid"]: name for name, js in self.jobsets.items()}
            after = self.jobsets
        elif kind == "jobs":
            self.jobs = {j["metadata"]["name"]: j for j in items}
            self._names_by_uid = {j["metadata"]["uid"]: name for name, j in self.jobs.items()}
            after = self.jobs
        else:
            self.workloads = {}
            for workload in items:
                uid = _job_uid(workload)
                if uid and _is_current_slice(workload, self.workloads.get(uid)):
                    self.workloads[uid] = workload
            after = self.workloads
        now = {key: o["metadata"].get("resourceVersion") for key, o in after.items()}
        keys = {key for key, rv in now.items() if known.get(key) != rv} | (set(known) - set(now))
        if kind == "jobsets":
            return {jobset_key(name) for name in keys}
        if kind == "jobs":  # by name; a namesake that replaced a Job has a new resourceVersion too
            owners = {_jobset_of(o) for name in keys for o in (before.get(name), after.get(name)) if o}
            return keys | {jobset_key(owner) for owner in owners if owner}
        return {self._names_by_uid[uid] for uid in keys if uid in self._names_by_uid} | {
            jobset_key(self._jobset_names_by_uid[uid]) for uid in keys if uid in self._jobset_names_by_uid
        }

    def _apply_job(self, event_type: str, job: dict[str, Any]) -> None:
        job = _slim(job)
        name = job["metadata"]["name"]
        if event_type == "DELETED":
            self.jobs.pop(name, None)
            self._names_by_uid.pop(job["metadata"]["uid"], None)
        else:
            self.jobs[name] = job
            self._names_by_uid[job["metadata"]["uid"]] = name
        self._wake(name)
        if owner := _jobset_of(job):
            self._wake(jobset_key(owner))

    def _apply_jobset(self, event_type: str, jobset: dict[str, Any]) -> None:
        jobset = _slim(jobset)
        name = jobset["metadata"]["name"]
        if event_type == "DELETED":
            self.jobsets.pop(name, None)
            self._jobset_names_by_uid.pop(jobset["metadata"]["uid"], None)
        else:
            self.jobsets[name] = jobset
            self._jobset_names_by_uid[jobset["metadata"]["uid"]] = name
        self._wake(jobset_key(name))

    def _apply_workload(self, event_type: str, workload: dict[str, Any]) -> None:
        workload = _slim(workload)
        uid = _job_uid(workload)
        if not uid:
            return
        if event_type == "DELETED":
            if self.workloads.get(uid, {}).get("metadata", {}).get("uid") == workload["metadata"].get("uid"):
                self.workloads.pop(uid, None)
        elif _is_current_slice(workload, self.workloads.get(uid)):
            self.workloads[uid] = workload
        if name := self._names_by_uid.get(uid):
            self._wake(name)
        if name := self._jobset_names_by_uid.get(uid):
            self._wake(jobset_key(name))


class _FollowingBase(Generic[S]):
    """A follower's view of its object(s) through the shared hub."""

    def __init__(self, hub: NamespaceWatch, follower: _Follower) -> None:
        self._hub = hub
        self._follower = follower
        self._first = True

    def _snapshot(self) -> S:
        raise NotImplementedError

    async def next(self) -> S:
        """The current state at first, then the newest state after each change; never a half-resynced
        cache (after a break, the hub lists Jobs and Workloads again before anyone reads)."""
        await self._hub.synced.wait()
        if self._first:
            self._first = False
            self._follower.changed.clear()
        else:
            await self._follower.changed.wait()
            self._follower.changed.clear()
            await self._hub.synced.wait()
        if self._hub.error is not None:
            raise self._hub.error
        return self._snapshot()

    def current(self) -> S:
        """The newest state without waiting for a change."""
        if self._hub.error is not None:
            raise self._hub.error
        return self._snapshot()

    async def _read(self, call: Callable[[AsyncKueueHook], Awaitable[T]]) -> T:
        """A one-off read over the hub's open client while its watch is healthy, else over a client of its
        own (the hub's may be closing after a break)."""
        hook = self._hub.hook
        if hook is not None and self._hub.synced.is_set():
            try:
                return await call(hook)
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                # the hub's session closed under us: its watch broke just now
        async with AsyncKueueHook(self._hub.conn_id).session() as own:
            return await call(own)


class Following(_FollowingBase[JobSnapshot]):
    """A trigger's view of one Job through the shared hub."""

    def _snapshot(self) -> JobSnapshot:
        return self._hub.snapshot(self._follower.job_name)

    async def pending_position(self, local_queue: str, workload: str) -> tuple[int, int] | None:
        """The Workload's place in its LocalQueue (Kueue's visibility API)."""
        ns = self._hub.namespace
        return await self._read(lambda hook: hook.pending_position(ns, local_queue, workload))

    async def set_parallelism(self, parallelism: int) -> None:
        ns, name = self._hub.namespace, self._follower.job_name
        await self._read(lambda hook: hook.set_parallelism(ns, name, parallelism))

    async def confirm(self) -> JobSnapshot:
        """The Job and its Workload read from the apiserver now (two GETs), not from the shared cache: asked
        before a decision that deletes the Job or ends the task, since a cache can lag or miss an event."""
        ns, name = self._hub.namespace, self._follower.job_name
        return await self._read(lambda hook: _read_snapshot(hook, ns, name))

    async def pods_and_events(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The Job's pods (or, with none, its Events), read now: asked only when pods seem stuck."""
        ns, name = self._hub.namespace, self._follower.job_name
        return await self._read(lambda hook: hook.pods_and_events_of_job(ns, name))


class FollowingJobSet(_FollowingBase[JobSetSnapshot]):
    """A trigger's view of one JobSet (its Jobs and Workload too) through the shared hub."""

    @property
    def name(self) -> str:
        return self._follower.job_name[len(JOBSET_KEY_PREFIX) :]

    def _snapshot(self) -> JobSetSnapshot:
        if self._hub.jobsets_error is not None:
            raise self._hub.jobsets_error
        return self._hub.jobset_snapshot(self.name)

    async def confirm(self) -> JobSetSnapshot:
        """The JobSet, its Jobs and its Workload read from the apiserver now (before a delete or the end)."""
        ns, name = self._hub.namespace, self.name
        return await self._read(lambda hook: _read_jobset_snapshot(hook, ns, name))

    async def pods_and_events(self, job_name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One child Job's pods (or, with none, its Events), read now: asked only when pods seem stuck."""
        ns = self._hub.namespace
        return await self._read(lambda hook: hook.pods_and_events_of_job(ns, job_name))


def _install_debug_signal(loop: asyncio.AbstractEventLoop) -> None:
    """Diagnostics for a trigger that stopped reacting: on SIGUSR2, log each hub's counters and the stack of
    every asyncio task of this loop (only with AIRFLOW_KUEUE_DEBUG_SIGNAL set; never in normal runs)."""

    def dump() -> None:
        out = io.StringIO()
        for (_, ns), hub in NamespaceWatch._hubs.items():
            print(
                f"hub {ns}: synced={hub.synced.is_set()} lists={hub.lists} failures={hub.failures} "
                f"events={hub.events} jobs={sorted(hub.jobs)} followers={sorted(hub.followers)} "
                f"task={hub._task}",
                file=out,
            )
        for task in asyncio.all_tasks(loop):
            print(f"--- {task!r}", file=out)
            task.print_stack(file=out)
        log.warning("asyncio state on SIGUSR2:\n%s", out.getvalue())

    with suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGUSR2, dump)


class WatchLoopEnded(RuntimeError):
    """A list+watch loop, which never ends by itself, ended (cancelled from outside): list again."""


async def _first_failure(*loops: Coroutine[Any, Any, None]) -> None:
    """Run the list+watch loops together; when one ends -- they only end by failing -- cancel the others
    and raise its error, so the hub lists both kinds again on a fresh connection. A loop cancelled from
    outside counts as a failure too: a hub with a dead loop would look synced while missing changes."""
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    raise WatchLoopEnded("a list+watch loop ended without an error")


async def _read_snapshot(hook: AsyncKueueHook, namespace: str, job_name: str) -> JobSnapshot:
    job = await hook.get_job(namespace, job_name)
    if job is None:
        return JobSnapshot(None, None)
    return JobSnapshot(job, await hook.workload_for_job(namespace, job["metadata"]["uid"]))


async def _read_jobset_snapshot(hook: AsyncKueueHook, namespace: str, name: str) -> JobSetSnapshot:
    jobset = await hook.get_jobset(namespace, name)
    if jobset is None:
        return JobSetSnapshot(None, (), None)
    children = tuple(await hook.jobset_children(namespace, name))
    return JobSetSnapshot(jobset, children, await hook.workload_for_job(namespace, jobset["metadata"]["uid"]))


def _jobset_of(job: dict[str, Any]) -> str | None:
    """The JobSet a Job belongs to (the JobSet controller's label), if any."""
    owner = (job.get("metadata", {}).get("labels") or {}).get(JOBSET_NAME_LABEL)
    return str(owner) if owner else None


def _job_uid(workload: dict[str, Any]) -> str | None:
    uid = workload.get("metadata", {}).get("labels", {}).get(JOB_UID_LABEL)
    return str(uid) if uid else None


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what no follower reads: ``managedFields`` and the pod template(s) (a Job's
    ``spec.template``, a Workload's ``spec.podSets[].template``). A triggerer following 1,000 Jobs would
    otherwise keep them all, and its garbage collector would walk them, stalling the event loop."""
    (obj.get("metadata") or {}).pop("managedFields", None)
    spec = obj.get("spec") or {}
    spec.pop("template", None)
    for replicated in spec.get("replicatedJobs") or []:  # a JobSet's templates: its Jobs' specs
        if isinstance(replicated, dict):
            replicated.pop("template", None)
    for pod_set in spec.get("podSets") or []:
        if isinstance(pod_set, dict):
            pod_set.pop("template", None)
    return obj


def _is_current_slice(workload: dict[str, Any], known: dict[str, Any] | None) -> bool:
    """An elastic Job (parallelism ramp) has one Workload per slice; the newest one is the Job's current one,
    so a late update of a replaced slice must not hide it."""
    if known is None or known["metadata"].get("uid") == workload["metadata"].get("uid"):
        return True
    return str(workload["metadata"].get("creationTimestamp", "")) >= str(
        known["metadata"].get("creationTimestamp", "")
    )
