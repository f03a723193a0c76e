"""Queue positions: one read of a LocalQueue's pending list serves every follower of a hub that asks within
the sharing window; followers asking while it is in flight wait for it; a cancelled follower does not cancel
it; a read that fails fails its askers and is not kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from airflow_kueue_provider.watch.pending_reads import (
    SHARE_SECONDS,
    TRIGGER_SHARE_SECONDS,
    SharedPendingReads,
)


def test_many_followers_share_one_read_per_local_queue() -> None:
    async def main() -> None:
        shared = SharedPendingReads(share_seconds=60)
        sent: list[str] = []

        def reader(queue: str) -> Any:
            async def read() -> dict[str, Any]:
                sent.append(queue)
                await asyncio.sleep(0.01)
                return {"items": [{"metadata": {"name": f"wl-{queue}"}}]}

            return read

        answers = await asyncio.gather(*(shared.get("lq-a", reader("lq-a")) for _ in range(50)))
        assert sent == ["lq-a"] and all(a == answers[0] for a in answers)
        await shared.get("lq-a", reader("lq-a"))  # within the window: kept
        await shared.get("lq-b", reader("lq-b"))  # another LocalQueue: its own read
        assert sent == ["lq-a", "lq-b"] and shared.reads == 2

    asyncio.run(main())


def test_an_old_list_is_read_again_and_the_kept_lists_are_bounded() -> None:
    async def main() -> None:
        shared = SharedPendingReads(share_seconds=0, max_queues=3)
        calls = 0

        async def read() -> dict[str, Any]:
            nonlocal calls
            calls += 1
            return {"items": []}

        for i in range(10):
            await shared.get(f"lq-{i % 5}", read)
        assert calls == 10 and len(shared._newest) == 3

    asyncio.run(main())


def test_a_cancelled_follower_leaves_the_read_to_the_others_and_a_failed_read_is_not_kept() -> None:
    async def main() -> None:
        shared = SharedPendingReads(share_seconds=60)
        gate = asyncio.Event()

        async def slow() -> dict[str, Any]:
            await gate.wait()
            return {"items": ["x"]}

        first = asyncio.ensure_future(shared.get("lq", slow))
        second = asyncio.ensure_future(shared.get("lq", slow))
        await asyncio.sleep(0)
        first.cancel()
        gate.set()
        assert await second == {"items": ["x"]}
        with pytest.raises(asyncio.CancelledError):
            await first

        async def broken() -> dict[str, Any]:
            raise RuntimeError("apiserver down")

        with pytest.raises(RuntimeError, match="apiserver down"):
            await shared.get("other", broken)
        assert "other" not in shared._newest

    asyncio.run(main())


def test_a_shared_list_says_when_it_was_read_so_a_later_asker_records_that_moment() -> None:
    async def main() -> None:
        shared = SharedPendingReads()  # the triggers' window: a minute
        before = time.time()
        assert shared.read_at("lq") >= before  # nothing kept: now

        async def read() -> dict[str, Any]:
            return {"items": []}

        await shared.get("lq", read)
        read_at = shared.read_at("lq")
        await asyncio.sleep(0.05)
        await shared.get("lq", read)  # served from the kept list: its moment is the read's, not now
        assert shared.reads == 1 and shared.read_at("lq") == read_at < time.time() - 0.04
        assert TRIGGER_SHARE_SECONDS > SHARE_SECONDS  # a trigger's line is coarser than a page's

    asyncio.run(main())
