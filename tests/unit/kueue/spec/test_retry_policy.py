"""Retry defaults for sharded work: per index unless the user or the template says otherwise, and exit codes
that end an index at once."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job
from airflow_kueue_provider.kueue.spec.job_spec import InvalidJobSpec
from airflow_kueue_provider.kueue.spec.retry_policy import (
    DEFAULT_BACKOFF_LIMIT_PER_INDEX,
    PER_INDEX_DEFAULT,
    exit_code_problems,
    per_index_retries,
)

from ..job_specs import spec


@pytest.mark.parametrize(
    ("given", "template_spec", "expected"),
    [
        (PER_INDEX_DEFAULT, {}, DEFAULT_BACKOFF_LIMIT_PER_INDEX),  # nothing said: one retry per index
        (3, {}, 3),
        (None, {}, None),  # None asked for: Kubernetes' whole-Job backoffLimit
        (PER_INDEX_DEFAULT, {"backoffLimitPerIndex": 4}, 4),  # the template's per-index limit
        (PER_INDEX_DEFAULT, {"backoffLimit": 10}, None),  # the template's whole-Job limit is kept
        (0, {"backoffLimit": 10}, 0),  # the parameter wins over the template
    ],
)
def test_per_index_retries(given: Any, template_spec: dict, expected: int | None) -> None:
    assert per_index_retries(given, template_spec) == expected


def test_listed_exit_codes_become_a_fail_index_rule_after_the_spot_rule() -> None:
    job = build_indexed_job(spec(spot=True, backoff_limit_per_index=1, non_retriable_exit_codes=[4, 3, 3]))
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert [r["action"] for r in rules] == ["Ignore", "FailIndex"]  # a Spot eviction is never final
    assert rules[1]["onExitCodes"] == {"operator": "In", "values": [3, 4]}


@pytest.mark.parametrize(
    ("codes", "per_index", "message"),
    [
        ([0], 1, "from 1 to 255"),
        ([256], 1, "from 1 to 255"),
        (["3"], 1, "from 1 to 255"),
        ([], 1, "give 1 to 255 exit codes"),
        ("3", 1, "set a list of exit codes"),
        ([3], None, "needs per-index retries"),
    ],
)
def test_bad_exit_codes_are_refused_with_what_to_change(
    codes: object, per_index: int | None, message: str
) -> None:
    assert any(message in p for p in exit_code_problems(codes, per_index))
    if isinstance(codes, list):
        with pytest.raises(InvalidJobSpec, match="non_retriable_exit_codes"):
            build_indexed_job(spec(backoff_limit_per_index=per_index, non_retriable_exit_codes=codes))
