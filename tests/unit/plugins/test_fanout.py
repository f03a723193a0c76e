"""One feed per Job for every stream that follows it (rendered once per change, off the event loop), one per
set of namespaces for the queue pages, and the caps on open streams."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.kueue.progress.eta import FinishClock
from airflow_kueue_provider.plugins import fanout, live_feed
from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.fanout import StreamCaps, TooManyStreams
from airflow_kueue_provider.watch.namespace_watch import KindSnapshot, NamespaceWatch


def _job(completed: str, complete: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"completedIndexes": completed}
    if complete:
        status["conditions"] = [{"type": "Complete", "status": "True"}]
    return {"metadata": {"name": "j"}, "spec": {"completions": 4}, "status": status}


class _Gated:
    """The hub's stand-in: the first snapshot at once, the next when the test opens the gate."""

    def __init__(self, snapshots: list[KindSnapshot], gate: asyncio.Event) -> None:
        self.snapshots, self.gate = snapshots, gate

    async def next(self) -> KindSnapshot:
        if len(self.snapshots) == 1:
            await self.gate.wait()
        return self.snapshots.pop(0)


def _names(chunks: list[str]) -> list[str]:
    return [c.split("\n", 1)[0].removeprefix("event: ") for c in chunks if c.startswith("event:")]


async def _never() -> bool:
    return False


def test_streams_of_one_job_share_one_render_per_change_done_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    follows: list[str] = []
    renders: list[str] = []
    monkeypatch.setattr(live_feed, "MIN_GAP_SECONDS", 0)

    async def scenario() -> list[list[str]]:
        gate = asyncio.Event()
        loop_thread = threading.current_thread().name

        @asynccontextmanager
        async def follow(conn_id: str, namespace: str, job_name: str) -> AsyncIterator[_Gated]:
            follows.append(job_name)
            yield _Gated([KindSnapshot(_job("0"), (), None), KindSnapshot(_job("0-3", True), (), None)], gate)

        monkeypatch.setattr(NamespaceWatch, "follow", follow)

        def render(
            job: dict[str, Any], wl: Any, now: float, clock: FinishClock
        ) -> tuple[Mapping[str, str], bool]:
            renders.append(threading.current_thread().name)
            assert threading.current_thread().name != loop_thread, "rendered on the event loop"
            return {"grid:j": job["status"]["completedIndexes"]}, bool(job["status"].get("conditions"))

        async def one() -> list[str]:
            return [c async for c in live_feed.job_events("conn", "ns", "j", render, _never)]

        streams = [asyncio.create_task(one()) for _ in range(20)]
        while len(renders) < 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        gate.set()
        out = await asyncio.gather(*streams)
        assert len(live_feed.FEEDS) == 0, "the feed leaves with its last stream"
        return out

    outputs = asyncio.run(scenario())
    assert follows == ["j"] and len(renders) == 2, "one follow and one render per change for 20 streams"
    for chunks in outputs:
        assert _names(chunks) == ["part", "part", "end"]
        assert json.loads(chunks[1].splitlines()[1].removeprefix("data: "))["html"] == "0-3"
    assert len({tuple(c) for c in outputs}) == 1, "every stream sent the same text"


def test_the_queue_streams_of_the_same_namespaces_share_one_read_per_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []
    monkeypatch.setattr(live_feed, "MIN_GAP_SECONDS", 0)

    async def scenario() -> list[list[str]]:
        changes: asyncio.Queue[object] = asyncio.Queue()

        class Changes:
            async def next(self) -> object:
                return await changes.get()

        @asynccontextmanager
        async def follow(conn_id: str, namespace: str, job_name: str) -> AsyncIterator[Changes]:
            yield Changes()

        monkeypatch.setattr(NamespaceWatch, "follow", follow)

        async def read_html() -> str:
            reads.append(1)
            return f"<table>{len(reads)}</table>"

        async def one(n: int) -> list[str]:
            out = []
            async for chunk in live_feed.queue_events("conn", ["ns"], read_html, _never):
                out.append(chunk)
                if len(out) == n:
                    return out
            return out

        streams = [asyncio.create_task(one(2)) for _ in range(10)]
        await asyncio.sleep(0.05)
        for _ in range(2):
            changes.put_nowait(object())
            await asyncio.sleep(0.2)
        return await asyncio.gather(*streams)

    outputs = asyncio.run(scenario())
    assert len(reads) == 2, f"one read per change for 10 streams, got {len(reads)}"
    assert all("<table>2</table>" in chunks[-1] for chunks in outputs)


def test_the_caps_count_per_user_and_in_total_and_say_which_option_raises_them() -> None:
    caps = StreamCaps(per_user=2, total=3)
    releases = [caps.acquire("alice"), caps.acquire("alice")]
    with pytest.raises(TooManyStreams, match=r"2 live Kueue streams of yours .*ui_streams_per_user"):
        caps.acquire("alice")
    caps.acquire("bob")
    with pytest.raises(TooManyStreams, match=r"3 live Kueue streams .* this API server .*ui_streams_total"):
        caps.acquire("carol")
    releases[0]()
    releases[0]()  # twice is once
    assert caps.open_for("alice") == 1 and caps.open_total == 2
    caps.acquire("carol")


@pytest.mark.parametrize(("option", "raw"), [("ui_streams_per_user", "0"), ("ui_streams_total", "many")])
def test_a_bad_cap_is_a_clear_error_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, option: str, raw: str
) -> None:
    source = kueue_config.ConfigSource({f"AIRFLOW__KUEUE__{option.upper()}": raw})
    monkeypatch.setattr(kueue_config, "current_source", lambda: source)
    with pytest.raises(ValueError, match=rf"\[kueue\] {option} must"):
        fanout.configured_caps()


def test_the_caps_come_from_the_kueue_section_through_the_providers_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "airflow.cfg").write_text("[kueue]\nui_streams_per_user = 3\n")
    source = kueue_config.ConfigSource({"AIRFLOW_HOME": str(tmp_path)})
    monkeypatch.setattr(kueue_config, "current_source", lambda: source)
    caps = fanout.configured_caps()
    assert (caps.per_user, caps.total) == (3, 100)


def test_a_held_stream_gives_its_slot_back_when_it_ends() -> None:
    caps = StreamCaps(per_user=1, total=1)

    async def body() -> AsyncIterator[str]:
        yield "a"

    async def drain() -> list[str]:
        return [c async for c in caps.hold("alice", body())]

    assert asyncio.run(drain()) == ["a"] and caps.open_total == 0
    unstarted = caps.hold("alice", body())
    assert caps.open_total == 1
    del unstarted
    assert caps.open_total == 0, "a response never sent gives its slot back"


class OneJob:
    kubernetes_conn_id = "conn"

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        return [{"metadata": {"name": "j", "namespace": "ns", "creationTimestamp": "2026-12-02T00:00:00Z"}}]


def test_a_stream_past_the_cap_is_a_429_saying_how_many_are_open_and_which_option() -> None:
    caps = StreamCaps(per_user=1, total=5)
    app = create_app(
        DashboardSettings(
            OneJob,  # type: ignore[arg-type]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            stream_caps=lambda: caps,
            stream_user=lambda: "alice",
        )
    )
    caps.acquire("alice")  # her one stream, open in another tab
    answer = TestClient(app).get(
        "/api/task/stream", params={"dag_id": "d", "run_id": "r", "task_id": "t", "job": "j"}
    )
    assert answer.status_code == 429
    assert (
        "1 live Kueue streams of yours are already open" in answer.text
        and "ui_streams_per_user" in answer.text
    )


def test_a_stream_cancelled_mid_way_gives_its_slot_back_and_the_last_one_stops_the_feed() -> None:
    """A closed tab: Starlette cancels the response's task while the stream waits for the next change."""
    caps = StreamCaps(per_user=5, total=5)
    feeds = fanout.Feeds()
    stopped: list[bool] = []

    async def produce(publish: fanout.Publish) -> None:
        publish(["event: part\ndata: {}\n\n"], False)
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append(True)

    async def scenario() -> None:
        async def one() -> None:
            async for _ in caps.hold("alice", feeds.follow("k", produce, 60, _never)):
                pass

        tabs = [asyncio.create_task(one()) for _ in range(3)]
        await asyncio.sleep(0.05)
        assert caps.open_for("alice") == 3 and len(feeds) == 1
        tabs[0].cancel()
        await asyncio.sleep(0.05)
        assert caps.open_for("alice") == 2 and not stopped, "the feed goes on for the other two"
        for tab in tabs[1:]:
            tab.cancel()
        await asyncio.gather(*tabs, return_exceptions=True)
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert caps.open_total == 0 and len(feeds) == 0 and stopped == [True]
