"""The shared watch's cache of one namespace: the latest objects of each watched kind and the Workloads, and
who follows them.

Slots are named by the kind's plural (``KindDescription.api.plural``) and ``WORKLOADS``; no kind is named
here. LISTs replace a slot whole (:meth:`NamespaceCache._replace`), watch events change one object
(``_apply``, ``_apply_workload``); either wakes only the followers whose object (or a child Job of it, or its
Workload) changed, and those of ``ANY_JOB``. Objects are kept slim (:func:`slim`): a triggerer may follow
1,000 Jobs, and a tenant may write 256 KiB of annotations on each of its Jobs. What one namespace makes the
cache hold is capped (``caps``): past a cap, the change raises ``NamespaceOverCap`` and the hub gives up on
that namespace.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..kueue.identity.cached_metadata import slim_metadata
from ..kueue.identity.workload_owner import workload_job_uid
from ..kueue.kinds import KindDescription, by_plural, child_kind, parent_names, workload_owner_uid
from .caps import HubCaps, json_size
from .snapshots import KindSnapshot

ANY_JOB = ""
"""The follower key of one that wakes on a change of any object or Workload of the namespace (no object is
named ""): the UI's queue page, which redraws when a Job of the namespace is admitted, evicted or finishes."""
WORKLOADS = "workloads"
"""The slot of Kueue's Workloads, by the ``job-uid`` label (the uid of the object Kueue admits)."""


def follower_key(kind: KindDescription, name: str) -> str:
    """``<plural>/<name>``: an object name never has a ``/``, so no two kinds' keys meet."""
    return kind.follower_prefix + name


@dataclass(eq=False)
class _Follower:
    key: str
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class NamespaceCache:
    """The objects of one namespace as last listed or watched, and the followers to wake when one changes
    (the list+watch loop that feeds it is ``NamespaceWatch``)."""

    def __init__(self, caps: HubCaps | None = None) -> None:
        self.namespace = ""
        self.caps = caps or HubCaps()
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}
        """Slot -> key -> object: a kind's objects by name (only the kinds watched here), Workloads by uid."""
        self._names_by_uid: dict[str, dict[str, str]] = {}  # kind slot -> uid -> name
        self._sizes: dict[str, dict[str, int]] = {}
        self.retained_bytes = 0  # the slimmed objects' JSON size, all slots (``caps``)
        self.followers: dict[str, set[_Follower]] = {}

    def slot(self, name: str) -> dict[str, dict[str, Any]]:
        return self.objects.setdefault(name, {})

    @property
    def workloads(self) -> dict[str, dict[str, Any]]:
        return self.slot(WORKLOADS)

    def _clear(self) -> None:
        """Drop every object (a hub that gave up must not keep a flood)."""
        self.objects, self._names_by_uid, self._sizes = {}, {}, {}
        self.retained_bytes = 0

    def _count(self, slot: str, key: str, obj: dict[str, Any] | None) -> None:
        """Account ``obj`` (None: gone) as ``slot``'s ``key`` and check the caps (raises NamespaceOverCap)."""
        sizes = self._sizes.setdefault(slot, {})
        self.retained_bytes -= sizes.pop(key, 0)
        if obj is not None:
            sizes[key] = json_size(obj)
            self.retained_bytes += sizes[key]
            self.caps.check(self.namespace, slot, len(sizes), self.retained_bytes)

    def _unfollow(self, follower: _Follower) -> None:
        group = self.followers.get(follower.key, set())
        group.discard(follower)
        if not group:
            self.followers.pop(follower.key, None)

    def snapshot(self, kind: KindDescription, name: str) -> KindSnapshot:
        """The object, its child Jobs and its Workload -- for a child Job, its parent's Workload (Kueue
        admits a JobSet whole)."""
        obj = self.slot(kind.api.plural).get(name)
        children: tuple[dict[str, Any], ...] = ()
        if kind.child_label is not None:
            jobs = self.slot(child_kind().api.plural).values()
            children = tuple(j for j in jobs if _labels(j).get(kind.child_label) == name)
        uid = workload_owner_uid(obj) if obj else None
        return KindSnapshot(obj, children, self.workloads.get(uid) if uid else None)

    def _wake(self, key: str | None = None) -> None:
        if key is None:
            groups = list(self.followers.values())
        else:
            groups = [self.followers.get(key, set()), self.followers.get(ANY_JOB, set())]
        for group in groups:
            for follower in group:
                follower.changed.set()

    def _replace(self, slot: str, items: list[dict[str, Any]]) -> set[str]:
        """Take a LIST as the slot; returns the follower keys whose object differs from what the cache held
        (changes the watch had not delivered, when the cache was in sync)."""
        before = self.slot(slot)
        self.caps.check(self.namespace, slot, len(items), 0)  # before slimming a flood
        after = _keyed(slot, [slim(item) for item in items])
        keys = _differing(before, after)
        if slot != WORKLOADS:
            self._names_by_uid[slot] = {o["metadata"]["uid"]: name for name, o in after.items()}
        self.objects[slot] = after
        self.retained_bytes -= sum(self._sizes.get(slot, {}).values())
        self._sizes[slot] = sizes = {key: json_size(o) for key, o in after.items()}
        self.retained_bytes += sum(sizes.values())
        self.caps.check(self.namespace, slot, len(sizes), self.retained_bytes)
        if slot == WORKLOADS:
            return {key for uid in keys for key in self._keys_of_uid(uid)}
        kind = _kind(slot)
        # by name; a namesake that replaced an object has a new resourceVersion too
        changed = {follower_key(kind, name) for name in keys}
        for name in keys:
            for obj in (before.get(name), after.get(name)):
                changed |= {follower_key(parent, p) for parent, p in parent_names(obj or {})}
        return changed

    def _differs(self, slot: str, items: list[dict[str, Any]]) -> set[str]:
        """The slot keys (names; job uids for Workloads) whose object a LIST of ``items`` shows otherwise
        than the cache holds it (another resourceVersion, or only on one side); the cache is not changed."""
        return _differing(self.slot(slot), _keyed(slot, [slim(item) for item in items]))

    def _apply(self, slot: str, event_type: str, obj: dict[str, Any]) -> None:
        """One watch event of a kind's slot."""
        obj = slim(obj)
        objects, name, uid = self.slot(slot), obj["metadata"]["name"], obj["metadata"]["uid"]
        if event_type == "DELETED":
            objects.pop(name, None)
            self._names_by_uid.setdefault(slot, {}).pop(uid, None)
        else:
            objects[name] = obj
            self._names_by_uid.setdefault(slot, {})[uid] = name
        self._count(slot, name, objects.get(name))
        self._wake(follower_key(_kind(slot), name))
        for parent, parent_name in parent_names(obj):
            self._wake(follower_key(parent, parent_name))

    def _apply_workload(self, event_type: str, workload: dict[str, Any]) -> None:
        workload = slim(workload)
        uid = _job_uid(workload)
        if not uid:
            return
        workloads = self.workloads
        if event_type == "DELETED":
            if workloads.get(uid, {}).get("metadata", {}).get("uid") == workload["metadata"].get("uid"):
                workloads.pop(uid, None)
        elif _is_current_slice(workload, workloads.get(uid)):
            workloads[uid] = workload
        self._count(WORKLOADS, uid, workloads.get(uid))
        for key in self._keys_of_uid(uid):
            self._wake(key)

    def _keys_of_uid(self, uid: str) -> list[str]:
        """The follower keys of the object (of any watched kind) whose uid a Workload names."""
        return [
            follower_key(_kind(slot), names[uid])
            for slot, names in self._names_by_uid.items()
            if uid in names
        ]


def slot_key(slot: str, obj: dict[str, Any]) -> str | None:
    """The key ``obj`` is kept under in ``slot``: its name, or for a Workload its Job's uid (None: none)."""
    return _job_uid(obj) if slot == WORKLOADS else obj.get("metadata", {}).get("name")


def _keyed(slot: str, items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A LIST's (slimmed) items as the slot keeps them: by name, or Workloads by their Job's uid (the
    current slice of an elastic Job's)."""
    if slot != WORKLOADS:
        return {o["metadata"]["name"]: o for o in items}
    after: dict[str, dict[str, Any]] = {}
    for workload in items:
        uid = _job_uid(workload)
        if uid and _is_current_slice(workload, after.get(uid)):
            after[uid] = workload
    return after


def _differing(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> set[str]:
    """Keys whose resourceVersion differs between two views of a slot, or that only one of them has."""
    known = {key: o["metadata"].get("resourceVersion") for key, o in before.items()}
    now = {key: o["metadata"].get("resourceVersion") for key, o in after.items()}
    return {key for key, rv in now.items() if known.get(key) != rv} | (set(known) - set(now))


def _kind(slot: str) -> KindDescription:
    kind = by_plural(slot)
    assert kind is not None, f"no registered kind watched as {slot}"
    return kind


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata", {}).get("labels") or {}


def _job_uid(workload: dict[str, Any]) -> str | None:
    """The uid of the object the Workload is Kueue's for: its label, bound by its controller owner (a copied
    label alone does not make a Workload another object's)."""
    return workload_job_uid(workload)


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what no follower reads: metadata but for the fields, labels and annotations some
    follower reads, each value bounded (``kueue.identity.cached_metadata``), and the pod or Job templates
    (``spec.template``, and the ``template`` of each item of a list in ``spec``: a JobSet's
    ``replicatedJobs``, a Workload's ``podSets``). A triggerer following 1,000 Jobs would otherwise keep them
    all, and its garbage collector would walk them, stalling the event loop."""
    obj["metadata"] = slim_metadata(obj.get("metadata") or {})
    spec = obj.get("spec") or {}
    spec.pop("template", None)
    for value in spec.values():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    item.pop("template", None)
    return obj


def _is_current_slice(workload: dict[str, Any], known: dict[str, Any] | None) -> bool:
    """An elastic Job (parallelism ramp) has one Workload per slice; the newest one is the Job's current one,
    so a late update of a replaced slice must not hide it."""
    if known is None or known["metadata"].get("uid") == workload["metadata"].get("uid"):
        return True
    return str(workload["metadata"].get("creationTimestamp", "")) >= str(
        known["metadata"].get("creationTimestamp", "")
    )
