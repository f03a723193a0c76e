"""The dashboard's ASGI app, built on its first request.

Airflow loads every plugin in every process that asks for plugins, and each task's worker process does
(its listener manager, at the task's start); only the API server serves a plugin's app. Built when the
plugin module is imported, the dashboard cost each task about a second of CPU before its DAG was parsed
(FastAPI, both Kubernetes clients, the routes): on a 2-core bed, eight align tasks starting together created
their first Job 8-10 s after they started. Mounted in its place, this wrapper imports and builds the app
the first time the API server routes a request to it (off the event loop; that request waits for it once).
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LazyApp:
    """An ASGI app that is ``factory``'s app (``"package.module:function"``) once its first call built it."""

    def __init__(self, factory: str) -> None:
        module, _, function = factory.partition(":")
        if not module or not function:
            raise ValueError(f"factory {factory!r}: give 'package.module:function'")
        self.factory = factory
        self._app: AsgiApp | None = None
        self._lock = threading.Lock()

    def build(self) -> AsgiApp:
        """The app, built once (thread-safe: concurrent first requests build it once)."""
        with self._lock:
            if self._app is None:
                module, _, function = self.factory.partition(":")
                self._app = getattr(importlib.import_module(module), function)()
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app if self._app is not None else await asyncio.to_thread(self.build)
        await app(scope, receive, send)
