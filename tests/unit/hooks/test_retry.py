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


def test_retry_after_is_honoured_and_capped() -> None:
    from airflow_kueue_provider.hooks.retry import RETRY_AFTER_CAP, describe, retry_after

    class Throttled(Exception):
        status = 429
        reason = "Too Many Requests"
        body = '{"kind":"Status","message":"storage is (re)initializing"}'

        def __init__(self, after: str | None) -> None:
            self.headers = {"Retry-After": after} if after is not None else {}

    assert retry_after(Throttled("3")) == 3.0
    assert retry_after(Throttled("3600")) == RETRY_AFTER_CAP
    assert retry_after(Throttled(None)) is None and retry_after(Throttled("soon")) is None
    assert describe(Throttled("1")) == "HTTP 429 Too Many Requests: storage is (re)initializing"


def test_a_throttled_call_waits_at_least_what_the_server_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", slept.append)

    class Throttled(Exception):
        status, reason, body, headers = 429, "Too Many Requests", None, {"Retry-After": "7"}

    calls = iter([Throttled(), "ok"])

    def flaky() -> str:
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    assert retry.call_with_retry(flaky, "GET thing") == "ok"
    assert slept and slept[0] >= 7.0
