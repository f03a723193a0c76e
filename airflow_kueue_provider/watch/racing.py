"""Running a watch round's parts together: the first to end ends the others, and a stream is closed when its
round ends early (its connection goes back at once)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any


async def first_done(*parts: Coroutine[Any, Any, Any]) -> set[asyncio.Task[Any]]:
    """Run ``parts`` together until the first one ends; cancel the others and wait for them; those ended."""
    tasks = [asyncio.ensure_future(part) for part in parts]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return done


async def first_of(*parts: Coroutine[Any, Any, int]) -> int:
    """The result of the first of ``parts`` to end, or its error (an error first, when two ended at once)."""
    return max(int(task.result()) for task in await first_done(*parts))


@asynccontextmanager
async def closing_stream(events: Any) -> AsyncIterator[None]:
    """Close a watch's event stream when its round ends early (its connection goes back at once)."""
    try:
        yield
    finally:
        if (aclose := getattr(events, "aclose", None)) is not None:
            await aclose()
