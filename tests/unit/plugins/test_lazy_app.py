"""The dashboard's app is built on its first request, not when a process loads the plugins."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from airflow_kueue_provider.plugins.lazy_app import LazyApp

BUILT: list[int] = []


def make_app() -> Any:
    BUILT.append(1)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    return app


def test_the_app_is_built_once_on_the_first_calls_and_serves_them_all() -> None:
    BUILT.clear()
    lazy = LazyApp(f"{__name__}:make_app")
    assert BUILT == []
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def calls() -> None:
        await asyncio.gather(*(lazy({"path": f"/{i}"}, None, send) for i in range(5)))  # type: ignore[arg-type]

    asyncio.run(calls())
    assert BUILT == [1]
    assert sorted(m["body"] for m in sent if m["type"] == "http.response.body") == [
        b"/0",
        b"/1",
        b"/2",
        b"/3",
        b"/4",
    ]


def test_a_factory_that_is_not_module_colon_function_is_refused() -> None:
    with pytest.raises(ValueError, match=r"package\.module:function"):
        LazyApp("airflow_kueue_provider.plugins.dashboard_app")


def test_loading_the_plugin_builds_no_app_and_imports_no_kubernetes_client() -> None:
    code = (
        "import sys; from airflow_kueue_provider.plugins.kueue_ui import KueueUiPlugin;"
        "print(sorted(m for m in ('fastapi', 'kubernetes', 'kubernetes_asyncio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
