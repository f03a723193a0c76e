"""Transient faults are retried with backoff; others are raised at once."""

from __future__ import annotations

import asyncio

import pytest

from airflow_kueue_provider.hooks import retry


class Status(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def test_transient_fault_is_retried_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)
    calls = iter([Status(503), ConnectionResetError(), "ok"])

    def flaky() -> str:
        value = next(calls)
        if isinstance(value, BaseException):
            raise value
        return value

    assert retry.call_with_retry(flaky, "flaky") == "ok"


def test_client_error_is_not_retried() -> None:
    calls = []

    def forbidden() -> None:
        calls.append(1)
        raise Status(403)

    with pytest.raises(Status):
        retry.call_with_retry(forbidden, "forbidden")
    assert calls == [1]


def test_async_retry_gives_up_after_the_last_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_sleep(_s: float) -> None:
        return None

    monkeypatch.setattr(retry.asyncio, "sleep", no_sleep)
    attempts = []

    async def always_busy() -> None:
        attempts.append(1)
        raise Status(429)

    with pytest.raises(Status):
        asyncio.run(retry.acall_with_retry(always_busy, "busy", attempts=3))
    assert len(attempts) == 3
