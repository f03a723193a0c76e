"""Retry transient Kubernetes API faults with exponential backoff (sync and async)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_AFTER_CAP = 60.0


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


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (``Retry-After`` on a 429/503), capped at RETRY_AFTER_CAP."""
    headers = getattr(exc, "headers", None) or {}
    try:
        value = float(str(headers.get("Retry-After")))
    except (TypeError, ValueError):
        return None
    return min(max(value, 0.0), RETRY_AFTER_CAP)


def describe(exc: BaseException) -> str:
    """One line for a log: an API error's status and the server's message, not its headers and body."""
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    if isinstance(status, int) and status:
        try:
            message = json.loads(body).get("message") if body else None
        except (TypeError, ValueError, AttributeError):
            message = None
        return f"HTTP {status} {getattr(exc, 'reason', '') or ''}: {message or ''}".strip(": ")
    return f"{type(exc).__name__}: {exc}"


def _wait(exc: BaseException, delay: float) -> float:
    return max(delay, retry_after(exc) or 0.0)


def call_with_retry(fn: Callable[[], T], what: str, attempts: int = 5) -> T:
    for delay in [*backoff_delays(attempts), None]:
        try:
            return fn()
        except Exception as exc:
            if delay is None or not is_transient(exc):
                raise
            wait = _wait(exc, delay)
            log.warning("%s failed (%s); retrying in %.1fs", what, describe(exc), wait)
            time.sleep(wait)
    raise AssertionError("unreachable")


async def acall_with_retry(fn: Callable[[], Awaitable[T]], what: str, attempts: int = 5) -> T:
    for delay in [*backoff_delays(attempts), None]:
        try:
            return await fn()
        except Exception as exc:
            if delay is None or not is_transient(exc):
                raise
            wait = _wait(exc, delay)
            log.warning("%s failed (%s); retrying in %.1fs", what, describe(exc), wait)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")
