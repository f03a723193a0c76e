"""The shared watch against the real apiserver: server-side watch timeouts and 410 Gone."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook
from airflow_kueue_provider.triggers import namespace_watch

from ..cluster import KueueEnv
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
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_list_jobs = AsyncKueueHook.list_jobs
    stale: dict[str, bool] = {"served": False}

    async def list_with_a_stale_version(
        self: AsyncKueueHook, namespace: str
    ) -> tuple[list[dict[str, Any]], str]:
        items, version = await real_list_jobs(self, namespace)
        if not stale["served"]:
            stale["served"] = True
            return items, "1"  # far older than the apiserver's watch cache: it answers 410 Gone
        return items, version

    monkeypatch.setattr(AsyncKueueHook, "list_jobs", list_with_a_stale_version)
    job = _submit(kueue_env, run_duration="4s")

    with caplog.at_level(logging.INFO, logger=namespace_watch.__name__):
        event = asyncio.run(_first_event(_trigger(kueue_env, job)))

    assert event["status"] == "success"
    assert any("410 Gone" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
