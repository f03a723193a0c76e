"""The caps on the Kueue pages' reads: per user, in total, given back on every exit, in own threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.plugins import read_caps
from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.read_caps import ReadCaps, TooManyReads


def _options(monkeypatch: pytest.MonkeyPatch, **options: str) -> None:
    """The [kueue] options as the process got them (the typed reader, never ``conf``)."""
    source = kueue_config.ConfigSource({f"AIRFLOW__KUEUE__{k.upper()}": v for k, v in options.items()})
    monkeypatch.setattr(kueue_config, "current_source", lambda: source)


def test_the_caps_count_per_user_and_in_total_and_say_which_option_raises_them() -> None:
    caps = ReadCaps(per_user=2, total=3)
    releases = [caps.acquire("alice"), caps.acquire("alice")]
    with pytest.raises(TooManyReads, match=r"2 Kueue page reads of yours .*ui_reads_per_user"):
        caps.acquire("alice")
    caps.acquire("bob")
    with pytest.raises(TooManyReads, match=r"3 Kueue page reads .* this API server .*ui_reads_total"):
        caps.acquire("carol")
    releases[0]()
    releases[0]()  # twice is once
    assert caps.running_for("alice") == 1 and caps.running_total == 2
    releases[1]()
    assert caps.users == 1, "a user without a running read leaves the map"


@pytest.mark.parametrize(("option", "raw"), [("ui_reads_per_user", "0"), ("ui_reads_total", "many")])
def test_a_bad_cap_is_a_clear_error_naming_the_option(
    monkeypatch: pytest.MonkeyPatch, option: str, raw: str
) -> None:
    _options(monkeypatch, **{option: raw})
    with pytest.raises(ValueError, match=rf"\[kueue\] {option} must"):
        read_caps.configured_read_caps()


def test_the_caps_come_from_the_kueue_section(monkeypatch: pytest.MonkeyPatch) -> None:
    _options(monkeypatch, ui_reads_per_user="3")
    caps = read_caps.configured_read_caps()
    assert (caps.per_user, caps.total) == (3, read_caps.DEFAULT_TOTAL)


def test_a_read_runs_in_the_plugins_own_threads_and_gives_its_slot_back_when_it_raises() -> None:
    caps = ReadCaps(per_user=1, total=1)

    def where() -> str:
        return threading.current_thread().name

    def fails() -> None:
        raise RuntimeError("cluster away")

    async def scenario() -> str:
        name = await caps.run("alice", where)
        with pytest.raises(RuntimeError):
            await caps.run("alice", fails)
        return name

    assert asyncio.run(scenario()).startswith("kueue-ui-read")
    assert caps.running_total == 0 and caps.users == 0


def test_a_cancelled_request_keeps_its_slot_until_its_thread_is_done() -> None:
    """The thread cannot be stopped: its slot is given back when it ends, so the pool never queues."""
    caps = ReadCaps(per_user=1, total=1)
    started, finish = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        finish.wait(5)
        return "done"

    async def scenario() -> None:
        request = asyncio.ensure_future(caps.run("alice", slow))
        await asyncio.to_thread(started.wait, 5)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        assert caps.running_for("alice") == 1, "the read still runs"
        with pytest.raises(TooManyReads):
            await caps.run("alice", slow)
        finish.set()
        for _ in range(100):
            if caps.running_total == 0:
                break
            await asyncio.sleep(0.01)
        assert await caps.run("alice", lambda: "again") == "again"

    asyncio.run(scenario())
    assert caps.running_total == 0


class NoJobs:
    kubernetes_conn_id = "conn"

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        return []


def test_a_read_past_the_cap_is_a_429_with_retry_after_naming_the_option() -> None:
    caps = ReadCaps(per_user=1, total=5)
    app = create_app(
        DashboardSettings(
            NoJobs,  # type: ignore[arg-type]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            log_access=[],
            queues_access=[],
            stream_user=lambda: "alice",
            read_caps=lambda: caps,
        )
    )
    query = {"dag_id": "d", "run_id": "r", "task_id": "t", "job": "j", "index": "0"}
    client = TestClient(app)
    assert client.get("/api/task/log", params=query).status_code == 404, "her one read: no such Job"
    release = caps.acquire("alice")  # a read of hers still running
    answer = client.get("/api/task/log", params=query)
    assert answer.status_code == 429 and answer.headers["retry-after"] == str(read_caps.RETRY_AFTER_SECONDS)
    assert "ui_reads_per_user" in answer.text
    for path in ("/api/task", "/task"):
        assert client.get(path, params=query).status_code == 429, path
    release()
    assert client.get("/api/task", params=query).json() == {"jobs": []}
