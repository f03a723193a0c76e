"""How much one namespace may make the shared watch hold, and the error that ends its followers beyond.

One triggerer's hubs follow every team's namespaces, and any tenant that can create Jobs can give them the
public ``managed-by`` label. Slimming (``kueue.identity.cached_metadata``) bounds each object; these
caps bound how many objects (per kind) and how many bytes (all kinds, the slimmed objects' JSON size) one
namespace's hub keeps. Past either, the hub gives up like one refused for good
(``kind_failures.WatchUnavailable``): only its followers end, with :class:`NamespaceOverCap`, the cache is
dropped, and other namespaces' hubs go on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..hooks.kueue_options import OPTIONS, option_count
from .kind_failures import WatchUnavailable, group_of

MAX_OBJECTS_OPTION = "watch_max_objects"
MAX_MIB_OPTION = "watch_max_mib"
DEFAULT_MAX_OBJECTS = int(OPTIONS[MAX_OBJECTS_OPTION].default)
"""Per kind and namespace: twice the 5,000 deferred tasks of one namespace a triggerer was measured with
(benchmarks/results/triggerer_load_5000_takeover.md), finished Jobs kept for a while included."""
DEFAULT_MAX_MIB = int(OPTIONS[MAX_MIB_OPTION].default)
"""Per namespace, all kinds: a slimmed Job or Workload is 1-3 KiB of JSON, so 10,000 of each fit."""
OVER_CAP_RETRY_SECONDS = 60.0
"""After a namespace went over a cap, followers that join within this time fail at once with the same
error instead of listing the flood again (each try would read the whole namespace)."""


class NamespaceOverCap(WatchUnavailable):
    """A namespace holds more than the hub may keep; its followers end with this, no other hub's."""

    def __init__(self, message: str, kind: str, namespace: str, option: str, limit: int, count: int) -> None:
        super().__init__(message, kind, None)
        self.namespace, self.option, self.limit, self.count = namespace, option, limit, count


@dataclass(frozen=True)
class HubCaps:
    max_objects: int = DEFAULT_MAX_OBJECTS
    max_bytes: int = DEFAULT_MAX_MIB * 1024 * 1024

    def check(self, namespace: str, kind: str, objects: int, retained_bytes: int) -> None:
        """Raise :class:`NamespaceOverCap` when ``objects`` of ``kind`` or ``retained_bytes`` pass a cap."""
        if objects > self.max_objects:
            raise over_cap(namespace, kind, MAX_OBJECTS_OPTION, self.max_objects, objects, "objects")
        if retained_bytes > self.max_bytes:
            raise over_cap(
                namespace, kind, MAX_MIB_OPTION, self.max_bytes // (1024 * 1024), retained_bytes, "bytes"
            )


def over_cap(namespace: str, kind: str, option: str, limit: int, count: int, unit: str) -> NamespaceOverCap:
    what = (
        f"{count} {kind} (more than [kueue] {option} = {limit} per kind)"
        if unit == "objects"
        else f"{count} bytes of {kind} and other objects (more than [kueue] {option} = {limit} MiB)"
    )
    resource = f"{kind}.{group_of(kind)}"
    return NamespaceOverCap(
        f"namespace {namespace} holds {what} with the provider's labels: the shared watch stopped following "
        f"it, and every task deferred in it fails. Fix: delete the objects no task created, and give the "
        f"namespace a ResourceQuota with count/{resource} (e.g. 2000) so its team cannot make that many; if "
        f"it really runs that many, raise [kueue] {option} on the triggerers and API servers",
        kind,
        namespace,
        option,
        limit,
        count,
    )


def configured_caps() -> HubCaps:
    """The caps from ``[kueue] watch_max_objects`` and ``watch_max_mib`` through the typed reader: a bad
    value (of these or any ``[kueue]`` option) fails the hub's first read naming the option."""
    objects, mib = option_count(MAX_OBJECTS_OPTION), option_count(MAX_MIB_OPTION)
    return HubCaps(objects, mib * 1024 * 1024)


def json_size(obj: Any) -> int:
    """The size a slimmed object is counted with: its compact JSON (the process holds a few times that)."""
    return len(json.dumps(obj, separators=(",", ":")))
