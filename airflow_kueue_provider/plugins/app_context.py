"""What every route of one UI app shares (``AppContext``): its settings and checks, the hook and caps made
once, and the two ways a route reads: a live stream counted against the stream caps (``held``), or a
blocking read in the plugin's threads within the read caps (``guarded``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from ..hooks.kueue_hook import KueueHook
from . import live_feed
from .app_access import AppAccess, app_access
from .app_settings import DashboardSettings
from .fanout import TooManyStreams
from .read_caps import RETRY_AFTER_SECONDS, TooManyReads

T = TypeVar("T")


class AppContext:
    """One app's shared state. The hook is made on the first request and then reused: a new one would
    load the kubeconfig and ask for the Kueue API version again on every page; the caps likewise."""

    def __init__(self, settings: DashboardSettings) -> None:
        self.settings = settings
        self.access: AppAccess = app_access(settings)
        self.hook: Callable[[], KueueHook] = functools.cache(settings.hook_factory)
        self._caps = functools.cache(settings.stream_caps)
        self._reads = functools.cache(settings.read_caps)

    def namespaces(self) -> Sequence[str]:
        """The namespaces the pages read (empty: every namespace)."""
        return self.settings.namespaces()

    def held(self, user: str, body: Any) -> StreamingResponse:
        """``body`` as a live stream counted against the caps, or 429 saying which cap is reached."""
        try:
            return event_stream(self._caps().hold(user, body))
        except TooManyStreams as exc:
            raise HTTPException(429, str(exc)) from None

    async def guarded(self, user: str, read: Callable[..., T], *args: Any) -> T:
        """``read(*args)`` (blocking) in one of the plugin's threads, in a slot of ``user``; 429 without."""
        try:
            return await self._reads().run(user, read, *args)
        except TooManyReads as exc:
            raise HTTPException(429, str(exc), headers={"Retry-After": str(RETRY_AFTER_SECONDS)}) from None


def event_stream(body: Any) -> StreamingResponse:
    """``body`` (server-sent events) as a response, uncapped: for a stream of one event."""
    return StreamingResponse(body, media_type="text/event-stream", headers=live_feed.HEADERS)
