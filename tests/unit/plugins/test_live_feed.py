"""The UI's event streams, on a stand-in for the shared watch (the real one: tests/integration/plugins)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from airflow_kueue_provider.kueue.progress.eta import FinishClock
from airflow_kueue_provider.plugins import live_feed
from airflow_kueue_provider.watch.namespace_watch import KindSnapshot, NamespaceWatch


def _job(completed: str, active: int, complete: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"completedIndexes": completed, "active": active}
    if complete:
        status["conditions"] = [{"type": "Complete", "status": "True"}]
    return {"metadata": {"name": "j"}, "spec": {"completions": 4}, "status": status}


class _Following:
    def __init__(self, snapshots: list[KindSnapshot]) -> None:
        self.snapshots = snapshots

    async def next(self) -> KindSnapshot:
        return self.snapshots.pop(0)


def _parse(chunks: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in chunks:
        lines = dict(line.split(": ", 1) for line in chunk.strip().splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_a_job_stream_sends_each_change_then_ends_when_the_job_finishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshots = [KindSnapshot(_job("0", 2), (), None), KindSnapshot(_job("0-3", 0, complete=True), (), None)]

    @asynccontextmanager
    async def follow(conn_id: str, namespace: str, job_name: str) -> AsyncIterator[_Following]:
        assert (conn_id, namespace, job_name) == ("conn", "ns", "j")
        yield _Following(snapshots)

    monkeypatch.setattr(NamespaceWatch, "follow", follow)
    monkeypatch.setattr(live_feed, "MIN_GAP_SECONDS", 0)
    seen: list[int] = []

    def render(
        job: dict[str, Any], wl: Any, now: float, clock: FinishClock
    ) -> tuple[Mapping[str, str], bool]:
        seen.append(id(clock))
        done = bool(job["status"].get("conditions"))
        return {"summary:j": f"<b>{job['status']['completedIndexes']}</b>"}, done

    async def never() -> bool:
        return False

    async def collect() -> list[str]:
        return [chunk async for chunk in live_feed.job_events("conn", "ns", "j", render, never)]

    events = _parse(asyncio.run(collect()))
    assert [name for name, _ in events] == ["part", "part", "end"]
    assert events[0][1]["html"] == "<b>0</b>" and events[1][1]["html"] == "<b>0-3</b>"
    assert len(seen) == 2 and len(set(seen)) == 1, "one clock for the stream, handed to every render"


def test_an_event_is_one_json_line() -> None:
    text = live_feed.event("part", {"part": "queues", "html": "<p>a\nb</p>"})
    assert text.endswith("\n\n") and text.count("\n") == 3
    assert json.loads(text.splitlines()[1].removeprefix("data: "))["html"] == "<p>a\nb</p>"


def test_a_watch_that_cannot_go_on_ends_the_stream_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refused:
        async def next(self) -> KindSnapshot:
            raise PermissionError("403 Forbidden: watch jobs")

    @asynccontextmanager
    async def follow(conn_id: str, namespace: str, job_name: str) -> AsyncIterator[Refused]:
        yield Refused()

    monkeypatch.setattr(NamespaceWatch, "follow", follow)

    async def never() -> bool:
        return False

    async def collect() -> list[str]:
        render = lambda *a: ({}, False)  # noqa: E731
        return [c async for c in live_feed.job_events("c", "ns", "j", render, never)]

    (only,) = _parse(asyncio.run(collect()))
    assert only[0] == "end" and "PermissionError" in only[1]["reason"] and "reload" in only[1]["reason"]
