"""When the shared watch gives up: consecutive failures counted per kind, and the reason a follower reads.

A hub lists and watches several kinds on one connection; one kind refused for good (a Role without
``workloads``) must not be hidden by another that keeps listing fine (each Jobs LIST would otherwise reset
one shared count, and the hub would retry the Workloads forever while its followers wait). So a successful
LIST resets only its own kind's LIST count, a WATCH that delivered something only its own kind's WATCH count
(a Role that allows ``list`` but not ``watch`` fails right after each good LIST), and a kind refused
FATAL_AFTER times in a row with 401, 403 or 404 ends the hub with :class:`WatchUnavailable`, naming the
kind, the status and the fix.
"""

from __future__ import annotations

from ..hooks.kueue_api import KUEUE_GROUP
from ..kueue.errors import KueueProviderError
from ..kueue.kinds import by_plural

FATAL_STATUSES = frozenset({401, 403, 404})
FATAL_AFTER = 3  # consecutive failures of one kind with a fatal status, without a successful LIST of it


def group_of(slot: str) -> str:
    """The API group of a watched slot (a kind's plural, or the Workloads), for RBAC fixes."""
    kind = by_plural(slot)
    return kind.api.group if kind is not None else KUEUE_GROUP if slot == "workloads" else "?"


NO_KIND = ""
"""The key of a failure no list+watch loop owns (the connection itself): any successful LIST resets it."""


class WatchUnavailable(RuntimeError, KueueProviderError):
    """The hub cannot list one kind in its namespace and gave up; every follower of the hub ends with this,
    and the next follower gets a fresh hub (which tries again)."""

    def __init__(self, message: str, kind: str, status: int | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class KindFailures:
    """Consecutive failures per kind and phase (its LIST, its WATCH); a success of one clears its count."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def listed(self, kind: str) -> None:
        self._counts.pop(kind, None)
        self._counts.pop(NO_KIND, None)

    def watched(self, kind: str) -> None:
        self._counts.pop(f"{kind} watch", None)

    def failed(self, kind: str | None, phase: str = "list") -> int:
        """Count one more failure of ``kind``'s ``phase`` (``list`` or ``watch``; kind None: the connection);
        returns its consecutive count."""
        key = (f"{kind} watch" if phase == "watch" else kind) if kind else NO_KIND
        self._counts[key] = self._counts.get(key, 0) + 1
        return self._counts[key]

    @property
    def worst(self) -> int:
        """The longest run of failures of any kind (the backoff's exponent, and what diagnostics show)."""
        return max(self._counts.values(), default=0)

    def __repr__(self) -> str:
        return repr(self._counts)


def is_fatal(status: int | None, count: int) -> bool:
    return status in FATAL_STATUSES and count >= FATAL_AFTER


def unavailable(
    kind: str | None, status: int | None, namespace: str, detail: str, phase: str = "list"
) -> WatchUnavailable:
    """The reason the hub gave up on ``kind``'s ``phase`` (``list``, ``watch``) in ``namespace``, with what
    to change."""
    what = f"the {kind} {phase.upper()}" if kind else "the watch"
    if status == 401:
        fix = "the connection's credentials were refused: renew its token or kubeconfig"
    elif status == 404 and kind:
        fix = (
            f"the apiserver does not serve {kind} ({group_of(kind)}) or the namespace is gone: "
            "install its CRD and check the namespace"
        )
    elif kind:
        fix = (
            f"let this identity list and watch {kind}: a Role rule in namespace {namespace} with apiGroups "
            f'["{group_of(kind)}"], resources ["{kind}"], verbs ["get", "list", "watch"] (see '
            "deploy/rbac/worker-triggerer.yaml)"
        )
    else:
        fix = "check the connection's identity and the namespace"
    return WatchUnavailable(
        f"{what} in namespace {namespace} failed {FATAL_AFTER} times in a row ({detail}): {fix}",
        kind or "",
        status,
    )
