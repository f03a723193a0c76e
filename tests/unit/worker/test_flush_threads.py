"""The flush's threads never wait for the main thread: bounded calls, quiet logging, a redacted failure."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from airflow_kueue_provider.storage.blob_errors import register_secret
from airflow_kueue_provider.worker.flush_threads import QUIET, run_bounded, upload_within


def test_an_upload_is_waited_for_until_its_deadline_only() -> None:
    assert upload_within(lambda: 7, time.monotonic() + 5, quiet=False) == (7, None)
    release = threading.Event()
    started = time.monotonic()
    try:
        assert upload_within(lambda: int(release.wait(30)), time.monotonic() + 0.1, quiet=True) == (
            None,
            "did not finish in time",
        )
    finally:
        release.set()
    assert time.monotonic() - started < 2  # the deadline plus its 0.2 s slack, not the hung upload


def test_a_failed_upload_says_why_without_its_secrets() -> None:
    register_secret("sig=flush-secret-123")

    def fail() -> int:
        raise ConnectionError("refused: https://acct/c?sig=flush-secret-123")

    seq, error = upload_within(fail, time.monotonic() + 5, quiet=False)
    assert seq is None and error is not None and error.startswith("failed: ")
    assert "flush-secret-123" not in error


def test_a_bounded_call_returns_even_when_the_call_blocks() -> None:
    release = threading.Event()
    started = time.monotonic()
    run_bounded(lambda: release.wait(30), 0.1)
    assert time.monotonic() - started < 2
    release.set()


def test_records_of_a_quiet_thread_are_dropped_before_the_handler(caplog: pytest.LogCaptureFixture) -> None:
    caplog.handler.addFilter(QUIET)
    logger = logging.getLogger("airflow_kueue_provider.worker.test_flush_threads")

    def quiet_thread() -> None:
        QUIET.local.quiet = True
        logger.warning("from a flush thread")

    try:
        with caplog.at_level(logging.WARNING):
            thread = threading.Thread(target=quiet_thread)
            thread.start()
            thread.join()
            logger.warning("from the main thread")
    finally:
        caplog.handler.removeFilter(QUIET)
    # only this logger's: a thread another test left (a UI feed retrying) may log into the capture meanwhile
    assert [r.getMessage() for r in caplog.records if r.name == logger.name] == ["from the main thread"]
