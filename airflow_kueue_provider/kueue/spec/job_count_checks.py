"""Checks of how many pods a Job runs and how it retries: completions, parallelism, partial admission,
per-index backoff, failed indexes, the TTL and Spot; the bounds Kubernetes and Kueue enforce, caught before
anything is submitted."""

from __future__ import annotations

from airflow_kueue_provider.kueue.pods.pod_spec_checks import Problem
from airflow_kueue_provider.kueue.spec.job_spec import MAX_COMPLETIONS, MAX_PARALLELISM, IndexedJobSpec
from airflow_kueue_provider.kueue.spec.retry_policy import exit_code_problems


def is_int(value: object) -> bool:
    """An integer, and not a bool (``True`` is an int to Python, never a count to a user)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_counts(spec: IndexedJobSpec, add: Problem) -> None:
    """Report each count out of its range, or inconsistent with another (parallelism > completions)."""
    completions_ok = is_int(spec.completions) and 1 <= spec.completions <= MAX_COMPLETIONS
    if not completions_ok:
        add(
            "completions",
            f"got {spec.completions!r}: set an integer from 1 to {MAX_COMPLETIONS} (one index per shard)",
        )
    if spec.parallelism is not None:
        if not (is_int(spec.parallelism) and 0 <= spec.parallelism <= MAX_PARALLELISM):
            add(
                "parallelism",
                f"got {spec.parallelism!r}: set an integer from 0 to {MAX_PARALLELISM}, or leave it unset "
                "to run all completions at once",
            )
        elif completions_ok and spec.parallelism > spec.completions:
            add(
                "parallelism",
                f"{spec.parallelism} is greater than completions={spec.completions}: lower it to at most "
                "completions (more pods than indexes would never start)",
            )
    if spec.min_parallelism is not None:
        low, high = 1, spec.effective_parallelism - 1
        if not (is_int(spec.min_parallelism) and is_int(high) and low <= spec.min_parallelism <= high):
            add(
                "min_parallelism",
                f"got {spec.min_parallelism!r}: set an integer from 1 to parallelism - 1 ({high}), the "
                "fewest pods Kueue may start the Job with when all of them do not fit (Kueue's partial "
                "admission), or leave it unset",
            )
    if spec.backoff_limit_per_index is not None and not (
        is_int(spec.backoff_limit_per_index) and spec.backoff_limit_per_index >= 0
    ):
        add(
            "backoff_limit_per_index",
            f"got {spec.backoff_limit_per_index!r}: "
            "set a non-negative integer (retries per index) or leave it unset",
        )
    for problem in exit_code_problems(spec.non_retriable_exit_codes, spec.backoff_limit_per_index):
        add("non_retriable_exit_codes", problem)
    if spec.max_failed_indexes is not None:
        if spec.backoff_limit_per_index is None:
            add(
                "max_failed_indexes",
                "requires backoff_limit_per_index (as in Kubernetes): set backoff_limit_per_index too, "
                "or leave max_failed_indexes unset",
            )
        if not (is_int(spec.max_failed_indexes) and spec.max_failed_indexes >= 0):
            add("max_failed_indexes", f"got {spec.max_failed_indexes!r}: set a non-negative integer")
        elif completions_ok and spec.max_failed_indexes > spec.completions:
            add(
                "max_failed_indexes",
                f"{spec.max_failed_indexes} is greater than completions={spec.completions}: "
                "lower it to at most completions",
            )
    ttl = spec.ttl_seconds_after_finished
    if ttl is not None and not (is_int(ttl) and ttl >= 0):
        add(
            "ttl_seconds_after_finished",
            f"got {ttl!r}: set a non-negative number of seconds, or None to keep finished Jobs",
        )
    if not isinstance(spec.spot, bool):
        add("spot", f"got {spec.spot!r}: set True or False")
