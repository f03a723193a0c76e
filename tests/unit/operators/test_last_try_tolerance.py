"""``max_failed_indexes`` is the last try's tolerance: a try with retries left whose indexes failed (within
the limit) fails, so Airflow's retry runs those shards again; the last try succeeds with up to the limit."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.operators.failure_path import (
    FailurePath,
    failed_before_last_try,
    retries_left,
)
from airflow_kueue_provider.operators.failures import KueueTaskFailed


def _context(try_number: int, max_tries: int | None) -> dict[str, Any]:
    return {"ti": SimpleNamespace(try_number=try_number, max_tries=max_tries)}


@pytest.mark.parametrize(
    ("retries", "try_number", "max_tries", "left"),
    [
        (0, 1, 0, False),  # no retries: the only try is the last
        (2, 1, 2, True),
        (2, 2, 2, True),
        (2, 3, 2, False),  # the last of 1 + 2 tries
        (1, 2, 3, True),  # cleared: max_tries grew
        (1, 1, None, True),  # no ti in the context: the task's retries
        (1, 2, None, False),
    ],
)
def test_retries_left_as_airflow_counts_them(
    retries: int, try_number: int, max_tries: int, left: bool
) -> None:
    assert retries_left(_context(try_number, max_tries), retries) is left


def test_a_try_with_retries_left_fails_on_tolerated_failures() -> None:
    why = failed_before_last_try({"failed": 2, "failed_indexes": "3,7"}, 2, 1)
    assert why is not None
    assert why.startswith("2 indexes failed (3,7), within max_failed_indexes=2, but try 1 has retries left")
    assert "only the last try succeeds with up to 2 failed" in why
    assert "1 index failed (3)" in str(failed_before_last_try({"failed": 1, "failed_indexes": "3"}, 1, 1))


def test_nothing_failed_or_no_limit_is_no_reason() -> None:
    assert failed_before_last_try({"failed": 0}, 2, 1) is None
    assert failed_before_last_try({"failed": 2, "failed_indexes": "3,7"}, None, 1) is None


class _Operator(FailurePath):
    def __init__(self, retries: int, max_failed_indexes: int | None) -> None:
        self.retries, self.max_failed_indexes = retries, max_failed_indexes

    def _log_tails(self, event: Any) -> str:
        return ""

    def _failure(self, message: str, event: Any) -> KueueTaskFailed:
        return KueueTaskFailed(message, event)


def _event() -> Any:
    return SimpleNamespace(to_dict=lambda: {"status": "success", "failed_indexes": "3,7"})


def test_the_hook_raises_a_retryable_failure_only_before_the_last_try() -> None:
    result = {"failed": 2, "failed_indexes": "3,7"}
    with pytest.raises(KueueTaskFailed, match="retries left"):
        _Operator(1, 2)._fail_tolerated_before_last_try(_context(1, 1), result, _event())
    _Operator(1, 2)._fail_tolerated_before_last_try(_context(2, 1), result, _event())  # the last: tolerated
    _Operator(0, 2)._fail_tolerated_before_last_try(_context(1, 0), result, _event())  # no retries
    _Operator(1, None)._fail_tolerated_before_last_try(_context(1, 1), result, _event())  # no limit
