"""The ``[kueue]`` allowlists of the pod policy, and their option formats (pure parsing, no I/O).

Two shapes:

- a **name list** (``allowed_service_accounts``, ``allowed_runtime_classes``, ...): names separated by commas
  or spaces; ``*`` allows any name, and a name ending in ``*`` (``team-a-*``) any name starting with it
  (Kubernetes names never hold a ``*``, so no literal name is lost).
- a **per-namespace list** (``allowed_local_queues``, ``allowed_priority_classes``,
  ``allowed_pod_priority_classes``, ``allowed_secrets``, ...): ``namespace:name name; namespace2:*; *:shared``
  -- entries separated by ``;``, each a namespace (``*``: every namespace) and its names (``*``: any). A
  namespace the option does not list gets only the ``*`` entry's names. LocalQueues and priority classes are
  per namespace because a team owns its namespace's queues: one list per team is the tenancy model
  (docs/tenancy-policy.md).

An empty option takes the option's default: "any" or "none", named where the policy declares it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import KueueProviderError

ANY = "*"
_SEPARATORS = re.compile(r"[,\s]+")


class PolicyConfigError(ValueError, KueueProviderError):
    """A ``[kueue]`` policy option that does not parse; the message names the option and its format."""


def name_list(option: str, raw: str | None, default_any: bool) -> frozenset[str]:
    """A name list; empty: ``{"*"}`` (any) or ``frozenset()`` (none), by the option's default."""
    names = frozenset(n for n in _SEPARATORS.split((raw or "").strip()) if n)
    return names or (frozenset({ANY}) if default_any else frozenset())


def allows(names: frozenset[str], name: object) -> bool:
    """``name`` is listed, or matches ``*`` or a ``prefix*`` entry."""
    if ANY in names or name in names:
        return True
    return isinstance(name, str) and any(
        n.endswith(ANY) and name.startswith(n[: -len(ANY)]) for n in names if len(n) > len(ANY)
    )


@dataclass(frozen=True)
class NamespacedNames:
    """Names allowed per namespace (``*`` keys and names as in the module docstring)."""

    option: str
    by_namespace: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def any(cls, option: str) -> NamespacedNames:
        return cls(option, {ANY: frozenset({ANY})})

    @classmethod
    def parse(cls, option: str, raw: str | None, default_any: bool) -> NamespacedNames:
        text = (raw or "").strip()
        if not text:
            return cls.any(option) if default_any else cls(option)
        by_namespace: dict[str, frozenset[str]] = {}
        for entry in (e.strip() for e in text.split(";")):
            if not entry:
                continue
            namespace, sep, names = entry.partition(":")
            if not sep or not namespace.strip():
                raise PolicyConfigError(
                    f"[kueue] {option}: entry {entry!r} is not 'namespace:name name'; write e.g. "
                    f"'{option} = team-a:q1 q2; team-b:*' (';' between namespaces, '*' for any)"
                )
            key = namespace.strip()
            by_namespace[key] = by_namespace.get(key, frozenset()) | name_list(option, names, False)
        return cls(option, by_namespace)

    def allows(self, namespace: object, name: object) -> bool:
        return any(allows(self.by_namespace.get(key, frozenset()), name) for key in (str(namespace), ANY))

    def listed_for(self, namespace: object) -> str:
        """What the namespace may use, for the error message."""
        names = self.by_namespace.get(str(namespace), frozenset()) | self.by_namespace.get(ANY, frozenset())
        return ", ".join(sorted(names)) or "none"

    def refusal(self, what: str, namespace: object, name: object) -> str | None:
        """Why ``name`` may not be used in ``namespace`` (None: it may, or none is asked for)."""
        if not name or self.allows(namespace, name):
            return None
        return (
            f"{what} {name!r} is not allowed in namespace {namespace!r} by [kueue] {self.option} "
            f"(allowed there: {self.listed_for(namespace)}): use an allowed one, or have the platform team "
            f"add '{namespace}:{name}' to {self.option}"
        )
