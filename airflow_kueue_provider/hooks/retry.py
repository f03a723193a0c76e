"""Retry transient Kubernetes API faults with exponential backoff (sync and async)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """A fault worth retrying: throttling, a 5xx, or the connection itself failing."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return status in TRANSIENT_STATUSES
    name = type(exc).__name__
    return isinstance(exc, (ConnectionError, TimeoutError, OSError)) or name in {
        "MaxRetryError",
        "ProtocolError",
        "ClientConnectorError",
        "ServerDisconnectedError",
        "ClientOSError",
        "ClientPayloadError",
    }


def backoff_delays(attempts: int, base: float = 0.5, cap: float = 10.0) -> list[float]:
    """Full-jitter exponential delays between ``attempts`` tries."""
    return [random.uniform(0, min(cap, base * 2**i)) for i in range(attempts - 1)]


def call_with_retry(fn: Callable[[], T], what: str, attempts: int = 5) -> T:
    for delay in [*backoff_delays(attempts), None]:
        try:
            return fn()
        except Exception as exc:
            if delay is None or not is_transient(exc):
                raise
            log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


async def acall_with_retry(fn: Callable[[], Awaitable[T]], what: str, attempts: int = 5) -> T:
    for delay in [*backoff_delays(attempts), None]:
        try:
            return await fn()
        except Exception as exc:
            if delay is None or not is_transient(exc):
                raise
            log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")
