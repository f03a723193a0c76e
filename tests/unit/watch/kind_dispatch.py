"""The hub calls ``list_kind``/``watch_kind`` with a kind's description; the watch tests' fake hooks keep
one readable method per slot (``list_jobs``, ``watch_jobsets``) and inherit this dispatch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow_kueue_provider.kueue.kinds import KindDescription


class KindDispatch:
    async def list_kind(
        self, kind: KindDescription, namespace: str, **kwargs: Any
    ) -> tuple[list[dict[str, Any]], str]:
        result: tuple[list[dict[str, Any]], str] = await getattr(self, f"list_{kind.api.plural}")(
            namespace, **kwargs
        )
        return result

    def watch_kind(self, kind: KindDescription, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        events: AsyncIterator[tuple[str, dict[str, Any]]] = getattr(self, f"watch_{kind.api.plural}")(*args)
        return events
