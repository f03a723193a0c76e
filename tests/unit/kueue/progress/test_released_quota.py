"""The meter of quota Kueue gave back in a Job's tail (reclaimable pods over time)."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.progress.released_quota import ReleasedQuota


def test_nothing_is_counted_before_kueue_reclaims_a_pod() -> None:
    meter = ReleasedQuota().observe(100.0, 0, 2.0).observe(110.0, 0, 2.0)
    assert meter.closed_at(120.0).pod_seconds == 0.0


def test_each_span_counts_the_pods_reclaimable_during_it() -> None:
    meter = ReleasedQuota().observe(100.0, 0, 2.0)
    meter = meter.observe(110.0, 2, 2.0)  # 2 pods back from 110 s
    meter = meter.observe(115.0, 3, 2.0)  # 3 from 115 s
    total = meter.closed_at(125.0)  # the Job ended at 125 s
    assert total.pod_seconds == pytest.approx(2 * 5 + 3 * 10)
    assert total.cpu_seconds == pytest.approx(2.0 * 40)


def test_a_span_is_closed_at_the_jobs_end_not_when_the_trigger_saw_it() -> None:
    meter = ReleasedQuota().observe(100.0, 4, 1.0)
    assert meter.closed_at(103.0).pod_seconds == pytest.approx(12.0)
    assert meter.closed_at(99.0).pod_seconds == 0.0  # seen after its end: nothing more


def test_unknown_cpu_per_pod_leaves_cpu_seconds_unknown_but_pod_seconds_counted() -> None:
    total = ReleasedQuota().observe(0.0, 2, None).closed_at(10.0)
    assert total.pod_seconds == pytest.approx(20.0)
    assert total.cpu_seconds is None


def test_a_re_deferral_carries_the_totals_and_counts_on_from_them() -> None:
    first = ReleasedQuota().observe(100.0, 2, 1.0).closed_at(110.0)  # 20 pod-seconds before the hand-back
    carried = ReleasedQuota.carried({"pod_seconds": first.pod_seconds, "cpu_seconds": first.cpu_seconds})
    assert (carried.pod_seconds, carried.cpu_seconds) == (20.0, 20.0)
    total = carried.observe(200.0, 1, 1.0).closed_at(205.0)
    assert (total.pod_seconds, total.cpu_seconds) == (25.0, 25.0)
    assert ReleasedQuota.carried(None) == ReleasedQuota()
    unknown_cpu = ReleasedQuota.carried({"pod_seconds": 7.0, "cpu_seconds": None})
    assert unknown_cpu.observe(0.0, 1, 2.0).closed_at(1.0).cpu_seconds is None  # stays unknown
