"""The shared watch against the real apiserver: server-side watch timeouts and 410 Gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook
from airflow_kueue_provider.triggers import namespace_watch

from ..cluster import KueueEnv, wait_for
from .test_kueue_job_trigger import _first_event, _submit, _trigger


def test_trigger_completes_across_many_server_side_watch_timeouts(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        namespace_watch, "WATCH_TIMEOUT_SECONDS", 1
    )  # the apiserver ends each watch after 1 s
    job = _submit(kueue_env, run_duration="5s")

    event = asyncio.run(_first_event(_trigger(kueue_env, job)))

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"


def test_410_gone_from_the_apiserver_makes_the_hub_list_again(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_list_jobs = AsyncKueueHook.list_jobs
    lists: list[str] = []

    async def list_with_a_stale_version(
        self: AsyncKueueHook, namespace: str
    ) -> tuple[list[dict[str, Any]], str]:
        items, version = await real_list_jobs(self, namespace)
        lists.append(version)
        if len(lists) == 1:
            return items, "1"  # far older than the apiserver's watch cache: it answers 410 Gone
        return items, version

    monkeypatch.setattr(AsyncKueueHook, "list_jobs", list_with_a_stale_version)
    job = _submit(kueue_env, run_duration="1s", hold=True)

    async def scenario() -> dict[str, Any]:
        follow = asyncio.create_task(_first_event(_trigger(kueue_env, job)))
        await asyncio.to_thread(wait_for, "a second LIST after the 410", lambda: len(lists) >= 2, 60)
        await asyncio.to_thread(kueue_env.release_until_finished, job["metadata"]["name"])
        return await follow

    event = asyncio.run(scenario())

    assert event["status"] == "success" and event["completed_indexes"] == "0-2"
    assert len(lists) >= 2, "the hub listed again after the apiserver answered 410 Gone"
