"""Field ownership of declared Kueue objects (pure): what server-side apply would change, whose fields it
would take, and the one-time adoption of fields written before server-side apply.

A declaration converges only if this provider's field manager owns what it declares: then a field dropped
from the declaration is dropped from the cluster by the next apply (server-side apply removes the fields a
manager owned and no longer applies). Objects written with client-side calls (``kubectl apply`` without
``--server-side``, the Python client's create or patch) carry those fields under an ``Update`` manager, so
the first apply moves them to this manager, as Kubernetes' "upgrading from client-side apply" does it
(client-go's ``csaupgrade.UpgradeManagedFields``): the previous managers' field sets are merged into this
manager's ``Apply`` entry and their entries dropped.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PREVIOUS_MANAGERS = ("kubectl-client-side-apply", "OpenAPI-Generator")
"""Field managers of client-side writes adopted by the first apply: ``kubectl apply`` (client-side) and the
Python Kubernetes client's create/patch (its user agent, ``OpenAPI-Generator/<version>/python``)."""
_CONFLICT_WITH = re.compile(r'conflict with "([^"]+)"')


@dataclass(frozen=True)
class FieldConflict:
    """A declared field whose live value another field manager set: the apply takes it only when forced."""

    field: str
    manager: str

    def __str__(self) -> str:
        return f"{self.field} (owned by {self.manager})"


def conflicts_of(status: Mapping[str, Any]) -> tuple[FieldConflict, ...]:
    """The conflicts a 409 ``Status`` of a server-side apply lists (``details.causes``)."""
    causes = (status.get("details") or {}).get("causes") or []
    out = []
    for cause in causes:
        if cause.get("reason") != "FieldManagerConflict":
            continue
        found = _CONFLICT_WITH.search(str(cause.get("message", "")))
        out.append(FieldConflict(str(cause.get("field", "")).lstrip("."), found.group(1) if found else "?"))
    return tuple(out)


def adopted_managed_fields(
    managed: Sequence[Mapping[str, Any]], previous: Iterable[str], manager: str
) -> list[dict[str, Any]] | None:
    """``managed`` with the ``Update`` entries of the ``previous`` managers merged into ``manager``'s
    ``Apply`` entry (made if absent); None when there is nothing to adopt."""
    previous = set(previous)
    legacy = [m for m in managed if m.get("manager") in previous and m.get("operation") == "Update"]
    if not legacy:
        return None
    kept = [copy.deepcopy(dict(m)) for m in managed if not any(m is old for old in legacy)]
    mine = next((m for m in kept if m.get("manager") == manager and m.get("operation") == "Apply"), None)
    if mine is None:
        mine = {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": legacy[0].get("apiVersion"),
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        kept.append(mine)
    for old in legacy:
        mine["fieldsV1"] = _union(mine.get("fieldsV1") or {}, old.get("fieldsV1") or {})
    times = [str(m["time"]) for m in (mine, *legacy) if m.get("time")]
    if times:
        mine["time"] = max(times)
    return kept


def previous_managers_in(managed: Sequence[Mapping[str, Any]], previous: Iterable[str]) -> list[str]:
    previous = set(previous)
    return sorted(
        {
            str(m["manager"])
            for m in managed
            if m.get("manager") in previous and m.get("operation") == "Update"
        }
    )


def _union(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(a))
    for key, value in b.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _union(out[key], value)
        else:
            out.setdefault(key, copy.deepcopy(value))
    return out


def applied_changes(
    live: Mapping[str, Any], result: Mapping[str, Any], declared: Mapping[str, Any], keys: Iterable[str]
) -> list[str]:
    """What an apply changes: the differences between ``live`` and ``result`` (the apply's dry run of the
    ``declared`` body) in the
    kind's declarable ``keys`` (``spec``, or a WorkloadPriorityClass's top-level fields), labels and
    annotations. A field the declaration does not set is named as removed from the declaration, with what the
    apply leaves (nothing, or the server's default)."""
    out: list[str] = []
    for key in keys:
        out += _changes(live.get(key), result.get(key), declared.get(key, _ABSENT), key)
    live_meta, result_meta = live.get("metadata") or {}, result.get("metadata") or {}
    declared_meta = declared.get("metadata") or {}
    for key in ("labels", "annotations"):
        want = declared_meta.get(key, _ABSENT)
        out += _changes(live_meta.get(key), result_meta.get(key), want, f"metadata.{key}")
    return out


_ABSENT = object()


def _changes(have: Any, will: Any, want: Any, here: str) -> list[str]:
    if isinstance(have, Mapping) and isinstance(will, Mapping):
        wants = want if isinstance(want, Mapping) else {}
        out: list[str] = []
        for key in sorted(set(have) | set(will)):
            child = wants.get(key, _ABSENT) if want is not _ABSENT else _ABSENT
            out += _changes(have.get(key), will.get(key), child, f"{here}.{key}")
        return out
    if isinstance(have, list) and isinstance(will, list) and len(have) == len(will):
        wants_list = want if isinstance(want, list) and len(want) == len(have) else None
        return [
            line
            for i, (h, w) in enumerate(zip(have, will, strict=True))
            for line in _changes(h, w, wants_list[i] if wants_list else _ABSENT, f"{here}[{i}]")
        ]
    if have == will:
        return []
    if want is _ABSENT:
        after = "removes it" if will is None else f"leaves {_short(will)}"
        return [f"{here}: removed from the declaration, live {_short(have)} (the apply {after})"]
    return [f"{here}: declared {_short(will)}, live {_short(have)}"]


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
