"""AsyncKueueHook is composed of a session (async_client) and one mixin per kind of object: it keeps every
call, importing it stays cheap, and the first session binds the client libraries in every part of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook

CALLS = {
    "session",
    "api",
    "get_raw",
    "kueue_version",
    "pending_position",
    "pending_workloads",
    "set_parallelism",
    "pods_and_events_of_job",
    "job_pods",
    "follow_log",
    "workload_for_job",
    "list_workloads",
    "watch_workloads",
    "get_kind",
    "list_kind",
    "watch_kind",
    "children_of",
    "delete_unless_finished",
}


def test_the_hook_has_every_call_of_its_parts() -> None:
    assert {name for name in dir(AsyncKueueHook) if not name.startswith("_")} == CALLS
    assert {"_list_pages", "_watch"} <= set(dir(AsyncKueueHook))


def test_importing_is_cheap_and_the_first_load_binds_the_clients_in_every_part() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from airflow_kueue_provider.hooks import kueue_async_hook, async_client, async_jobs, async_kinds
        from airflow_kueue_provider.hooks import async_workloads, async_pod_logs
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"kubernetes_asyncio", "aiohttp"})
        assert not loaded, f"imported at import time: {loaded}"
        asyncio.run(kueue_async_hook.load_clients())
        names = ("aiohttp", "aclient", "ApiException", "DELETE_ATTEMPTS", "KueueApiError", "REQUEST_TIMEOUT")
        for module in (async_client, async_jobs, async_kinds, async_workloads, async_pod_logs):
            missing = [name for name in names if vars(module).get(name) is None]
            assert not missing, f"{module.__name__} lacks {missing}"
        assert async_jobs.REQUEST_TIMEOUT is async_client.REQUEST_TIMEOUT
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
