"""What a follower of the shared watch sees: its object (of any registered kind), the object's child Jobs
(a JobSet's) and its Workload at once.

The hub builds them from its cache (``NamespaceCache.snapshot``); :func:`read_snapshot` reads the same from
the apiserver now, for a decision a lagging cache must not make.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..kueue.kinds import KindDescription, workload_owner_uid

if TYPE_CHECKING:
    from ..hooks.kueue_async_hook import AsyncKueueHook


@dataclass(frozen=True)
class KindSnapshot:
    obj: dict[str, Any] | None
    """The followed object; None: there is none of that name."""
    children: tuple[dict[str, Any], ...]
    """Its child Jobs (by its kind's ``child_label``); none for a kind without children."""
    workload: dict[str, Any] | None


async def read_snapshot(
    hook: AsyncKueueHook, kind: KindDescription, namespace: str, name: str
) -> KindSnapshot:
    obj = await hook.get_kind(kind, namespace, name)
    if obj is None:
        return KindSnapshot(None, (), None)
    children = tuple(await hook.children_of(kind, namespace, name))
    uid = workload_owner_uid(obj)
    return KindSnapshot(obj, children, await hook.workload_for_job(namespace, uid) if uid else None)
