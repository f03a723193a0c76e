"""The shared watch against the real apiserver: server-side watch timeouts and 410 Gone."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.rest import ApiException

from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
from airflow_kueue_provider.watch import namespace_watch
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch
from devcluster.layout import PORTS

from ..cluster import KueueEnv, wait_for
from ..tcp_proxy import FreezableProxy, kubeconfig_through
from ..triggers.test_kueue_job_trigger import _first_event, _submit, _trigger


def test_trigger_completes_across_many_server_side_watch_timeouts(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(namespace_watch, "RESYNC_SECONDS", 1.5)  # the apiserver ends each watch after ~1 s
    job = _submit(kueue_env, run_duration="5s")

    event = asyncio.run(_first_event(_trigger(kueue_env, job)))

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"


def test_a_410_gone_on_the_watch_makes_the_hub_list_again(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Jobs watch answers 410 Gone (as the apiserver does for a resourceVersion its watch cache no
    longer holds; on a fresh cluster that depends on compaction timing, so it is injected here)."""
    real_list_jobs, real_watch_jobs = AsyncKueueHook.list_jobs, AsyncKueueHook.watch_jobs
    lists: list[str] = []

    async def counting_list(self: AsyncKueueHook, namespace: str) -> tuple[list[dict[str, Any]], str]:
        items, version = await real_list_jobs(self, namespace)
        lists.append(version)
        return items, version

    async def gone_once(self: AsyncKueueHook, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        if len(lists) == 1:
            raise ApiException(status=410, reason="Gone: too old resource version")
        async for event in real_watch_jobs(self, *args):
            yield event

    monkeypatch.setattr(AsyncKueueHook, "list_jobs", counting_list)
    monkeypatch.setattr(AsyncKueueHook, "watch_jobs", gone_once)
    job = _submit(kueue_env, run_duration="1s", hold=True)

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_trigger(kueue_env, job)))
        await asyncio.to_thread(wait_for, "a second LIST after the 410", lambda: len(lists) >= 2, 60)
        await asyncio.to_thread(kueue_env.release_until_finished, job["metadata"]["name"])
        return await asyncio.wait_for(follow, 150)

    event = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert len(lists) >= 2, "the hub listed again after the watch answered 410 Gone"


def test_a_watch_that_stays_open_but_misses_changes_is_caught_by_the_periodic_list(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """What an apiserver whose watch cache stopped following etcd looks like: the Jobs watch stays open (its
    bookmarks keep it alive) and delivers nothing. The hub's periodic LIST sees the finished Job anyway."""
    monkeypatch.setattr(namespace_watch, "RESYNC_SECONDS", 4.0)
    real_watch_jobs = AsyncKueueHook.watch_jobs

    async def silent(self: AsyncKueueHook, namespace: str, version: str, timeout: int, *rest: Any) -> Any:
        async for event_type, obj in real_watch_jobs(self, namespace, version, timeout, *rest):
            if event_type == "BOOKMARK":
                yield event_type, obj  # bookmarks only: every change is lost

    monkeypatch.setattr(AsyncKueueHook, "watch_jobs", silent)
    job = _submit(kueue_env, run_duration="1s", hold=True)

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_trigger(kueue_env, job)))
        await asyncio.to_thread(kueue_env.release_until_finished, job["metadata"]["name"])
        return await asyncio.wait_for(follow, 120)

    with caplog.at_level("WARNING", logger=namespace_watch.__name__):
        event = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert "change(s) the watch had not delivered" in caplog.text


def test_a_watch_that_stalls_without_closing_is_relisted_and_the_trigger_succeeds(
    kueue_env: KueueEnv, devcluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The trigger's connections go through a proxy that freezes them (open, silent): the read timeout
    notices within WATCH_READ_TIMEOUT, the hub lists again on a new connection and sees the Job finish."""
    read_timeout = 5.0
    monkeypatch.setattr(namespace_watch, "WATCH_READ_TIMEOUT", read_timeout)
    job = _submit(kueue_env, run_duration="1s", hold=True)
    name = job["metadata"]["name"]
    with FreezableProxy("127.0.0.1", PORTS.apiserver).running() as proxy:
        kubeconfig = kubeconfig_through(
            proxy, Path(devcluster_env["KUBECONFIG"]), PORTS.apiserver, tmp_path / "kubeconfig-via-proxy"
        )
        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        monkeypatch.setenv("AIRFLOW_CONN_KUBE_VIA_PROXY", json.dumps(conn))

        async def scenario() -> tuple[dict[str, Any], float, int]:
            trigger = KueueJobTrigger(
                job_name=name,
                namespace=kueue_env.namespace,
                queue_name=kueue_env.local_queue,
                kubernetes_conn_id="kube_via_proxy",
                job_uid=job["metadata"]["uid"],
            )
            follow = asyncio.create_task(_first_event(trigger))
            await asyncio.to_thread(wait_for, "pods running", lambda: len(kueue_env.running_pods(name)) == 3)
            hub = NamespaceWatch._hubs[("kube_via_proxy", kueue_env.namespace)]
            await asyncio.wait_for(hub.synced.wait(), 30)
            lists_before = hub.lists
            assert proxy.freeze_open_connections() >= 1
            frozen_at = time.monotonic()
            await asyncio.to_thread(kueue_env.release_until_finished, name)  # finishes behind the freeze
            event = await asyncio.wait_for(follow, 120)
            return event, time.monotonic() - frozen_at, hub.lists - lists_before

        event, elapsed, relists = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert relists >= 1, "the hub listed again after the stall"
    assert elapsed < 2 * read_timeout + 10, f"the stall was noticed and recovered from in {elapsed:.1f}s"
