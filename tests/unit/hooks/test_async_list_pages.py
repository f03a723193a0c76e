"""``AsyncKueueSession._list_pages``: a flooded namespace costs one page at a time, and no more pages than the
caller keeps (the watch hub's slimming and cap, issue 38 item 3)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from airflow_kueue_provider.hooks.async_client import AsyncKueueSession, ListTooLong


class Page:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.status, self._body = 200, json.dumps(doc).encode()

    async def read(self) -> bytes:
        return self._body


def pages(count: int, per_page: int) -> tuple[Any, list[str | None]]:
    """A LIST of ``count`` pages of big objects; records the continue token of each page asked for."""
    asked: list[str | None] = []

    def list_fn(**kw: Any) -> Any:
        asked.append(kw.get("_continue"))
        n = len(asked)
        items = [
            {"metadata": {"name": f"j{n}-{i}", "annotations": {"big": "x" * 10_000}}} for i in range(per_page)
        ]
        more = {"continue": f"t{n}"} if n < count else {}

        async def answer() -> Page:
            return Page({"metadata": {"resourceVersion": "7", **more}, "items": items})

        return answer()

    return list_fn, asked


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": obj["metadata"]["name"]}}


def test_each_page_is_reduced_as_it_arrives() -> None:
    list_fn, asked = pages(3, 4)
    items, version = asyncio.run(AsyncKueueSession()._list_pages(list_fn, "list Jobs", keep=_slim))
    assert version == "7" and asked == [None, "t1", "t2"]
    assert len(items) == 12 and all("annotations" not in i["metadata"] for i in items)


def test_past_max_items_the_list_stops_without_reading_further_pages() -> None:
    list_fn, asked = pages(50, 4)
    with pytest.raises(ListTooLong) as too_long:
        asyncio.run(AsyncKueueSession()._list_pages(list_fn, "list Jobs", keep=_slim, max_items=10))
    assert too_long.value.count == 12 and too_long.value.more
    assert len(asked) == 3, "it read the pages up to the cap, not the 50 of the flood"
    assert "list Jobs: more than 12 items" in str(too_long.value)
