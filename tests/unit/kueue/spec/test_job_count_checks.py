"""check_counts: each count in its range and consistent with the others."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.spec.job_count_checks import check_counts, is_int

from ..job_specs import spec


def parameters_of(**overrides: Any) -> list[str]:
    found: list[str] = []
    check_counts(spec(**overrides), lambda parameter, text: found.append(parameter))
    return found


def test_a_bool_is_no_count() -> None:
    assert is_int(3) and is_int(0)
    assert not is_int(True) and not is_int(3.0) and not is_int("3")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, []),
        ({"completions": True}, ["completions"]),
        # a bad completions is reported once: parallelism is not also compared with it
        ({"completions": "10", "parallelism": 11}, ["completions"]),
        ({"parallelism": 11}, ["parallelism"]),
        ({"parallelism": 4, "min_parallelism": 3}, []),
        ({"parallelism": 4, "min_parallelism": 4}, ["min_parallelism"]),
        # both of max_failed_indexes' problems at once: no per-index backoff, and a negative value
        ({"max_failed_indexes": -1}, ["max_failed_indexes", "max_failed_indexes"]),
        ({"backoff_limit_per_index": 0, "non_retriable_exit_codes": "2"}, ["non_retriable_exit_codes"]),
        ({"ttl_seconds_after_finished": -1, "spot": "yes"}, ["ttl_seconds_after_finished", "spot"]),
    ],
)
def test_counts(overrides: dict[str, Any], expected: list[str]) -> None:
    assert parameters_of(**overrides) == expected
