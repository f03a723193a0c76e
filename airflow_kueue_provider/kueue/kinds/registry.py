"""The job kinds the provider knows, each registered once by its own module (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KueueProviderError
from .description import Condition, KindDescription

_KINDS: dict[str, KindDescription] = {}
_CHILD_LABELS: frozenset[str] = frozenset()  # kept current by register/unregister: read per cached object


class UnknownKind(ValueError, KueueProviderError):
    """A kind nobody registered (a typo, or its module was not imported)."""


def register(description: KindDescription) -> KindDescription:
    """Register a kind (its module does, once, when imported); registering the same kind again replaces it
    only with an equal description."""
    known = _KINDS.get(description.kind)
    if known is not None and known != description:
        raise ValueError(f"kind {description.kind} is registered already with another description")
    _check_unique(description)
    _KINDS[description.kind] = description
    _changed()
    return description


def _changed() -> None:
    global _CHILD_LABELS
    _CHILD_LABELS = frozenset(
        label for d in _KINDS.values() for label in (d.child_label, d.child_part_label) if label
    )


def _check_unique(new: KindDescription) -> None:
    """What tells kinds apart must be the new kind's own: its name key (events), its Secret tag (admission
    binds a Secret by it; a hex tag could be read as an access id) and its plural (the shared watch)."""
    tag = new.secret_tag
    if tag and (not tag.endswith("-") or re.fullmatch(r"[0-9a-f-]+", tag)):
        raise ValueError(f"kind {new.kind}: secret_tag {tag!r} must be letters ending in '-', not hex")
    for known in _KINDS.values():
        if known.kind == new.kind:
            continue
        for what in ("name_key", "uid_key", "secret_tag"):
            if getattr(known, what) == getattr(new, what):
                raise ValueError(f"kind {new.kind}: {what} {getattr(new, what)!r} is {known.kind}'s already")
        if known.api.plural == new.api.plural:
            raise ValueError(f"kind {new.kind}: plural {new.api.plural!r} is {known.kind}'s already")


def unregister(kind: str) -> None:
    """Forget a kind (tests that register one of their own)."""
    _KINDS.pop(kind, None)
    _changed()


def describe(kind: str) -> KindDescription:
    try:
        return _KINDS[kind]
    except KeyError:
        raise UnknownKind(f"job kind {kind!r} is not registered (known: {sorted(_KINDS)})") from None


def kinds() -> tuple[KindDescription, ...]:
    """Every registered kind, in registration order."""
    return tuple(_KINDS.values())


def by_plural(plural: str) -> KindDescription | None:
    return next((k for k in _KINDS.values() if k.api.plural == plural), None)


def kind_of_keys(data: Mapping[str, Any]) -> KindDescription:
    """The kind whose name key ``data`` (an event, a task's result) carries; the child kind (the Job) when
    none does (an event that failed before it knew its object)."""
    return next((k for k in _KINDS.values() if k.name_key in data), None) or child_kind()


def finished_condition(obj: Mapping[str, Any]) -> Condition | None:
    """The terminal condition of an object of any registered kind (a caller that does not know the kind: the
    first kind whose end rule says it finished; a rule never matches another kind's object)."""
    for description in _KINDS.values():
        if (cond := description.finished(obj)) is not None:
            return cond
    return None


def succeeded(obj: Mapping[str, Any]) -> bool:
    """Whether an object of any registered kind finished successfully (its own kind's end rule says so)."""
    return any(d.finished(obj) is not None and d.succeeded(obj) for d in _KINDS.values())


def child_kind() -> KindDescription:
    """The kind other kinds' child Jobs are (``hosts_children``): the shared watch always lists it."""
    return next(k for k in _KINDS.values() if k.hosts_children)


def workload_owner_uid(obj: Mapping[str, Any]) -> str | None:
    """The UID Kueue's Workload of ``obj`` is labelled with: for a child Job, its parent's (Kueue admits a
    JobSet whole, its Jobs have no Workload of their own); for any other object, its own."""
    meta = obj.get("metadata") or {}
    parents = {d.kind for d in _KINDS.values() if d.child_label}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") in parents and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    uid = meta.get("uid")
    return str(uid) if uid else None


@dataclass(frozen=True)
class ChildOf:
    """What a child Job's labels say it belongs to: its parent's kind and name, and which part of it."""

    parent: KindDescription
    name: str
    part: str


def child_of(obj: Mapping[str, Any]) -> ChildOf | None:
    """The parent a Job's labels name (the parent kind's child label and part label); None for a Job of its
    own. Labels only: what proves it is ``KindDescription.owns_child``."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for d in _KINDS.values():
        if d.child_label and d.child_part_label:
            name, part = labels.get(d.child_label), labels.get(d.child_part_label)
            if name and part:
                return ChildOf(d, str(name), str(part))
    return None


def child_labels() -> frozenset[str]:
    """The labels every registered kind's child Jobs carry (what a cache keeps of a Job's labels)."""
    return _CHILD_LABELS


def operator_names() -> frozenset[str]:
    """Every registered kind's operator class names."""
    return frozenset(n for d in _KINDS.values() for n in d.operator_names)


def parent_names(obj: Mapping[str, Any]) -> list[tuple[KindDescription, str]]:
    """The objects whose child Job ``obj`` is, by their kinds' child label: (kind, parent name)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    found = [(d, labels.get(d.child_label)) for d in _KINDS.values() if d.child_label]
    return [(d, name) for d, name in found if isinstance(name, str) and name]
