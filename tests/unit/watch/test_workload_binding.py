"""The watch cache and the Workload read take a Workload as a Job's only by its controller owner's uid."""

from __future__ import annotations

from airflow_kueue_provider.hooks.kueue_api import first_owned_by
from airflow_kueue_provider.watch.cache import NamespaceCache
from tests.unit.kueue.identity.test_workload_owner import _workload


def test_a_copied_label_is_neither_the_jobs_workload_in_a_read_nor_in_the_watch_cache() -> None:
    ours, forged = _workload("w1", "job-a", "job-a"), _workload("w9", "job-a", "job-x")
    assert first_owned_by([forged, ours], "job-a") is ours, "the newer forged one is not taken"
    assert first_owned_by([forged], "job-a") is None, "no fallback to whatever the label selected"
    cache = NamespaceCache()
    cache._apply_workload("ADDED", _workload("w1", "job-a", "job-a"))
    cache._apply_workload("ADDED", _workload("w9", "job-a", None))
    assert cache.workloads["job-a"]["metadata"]["name"] == "w1", "a tenant's copy does not replace it"
