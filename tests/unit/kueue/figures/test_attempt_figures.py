"""Each Job of a task instance priced at its own pod count and time; the task instance's totals."""

from __future__ import annotations

from datetime import UTC

from airflow_kueue_provider.kueue.figures.attempt_figures import (
    AttemptFigures,
    CostModel,
    merged,
    status_figures,
    totals,
)
from airflow_kueue_provider.kueue.figures.cost import VmPrice

MODEL = CostModel({"cpu": "4", "memory": "16Gi"}, VmPrice())  # a quarter of a D16ds_v5


def test_a_spot_run_of_50_pods_for_an_hour() -> None:
    figures = MODEL.figures("j", pods=50, queued_seconds=10.0, running_seconds=3600.0, spot=True)
    assert figures.cost_usd == round(0.25 * 50 * 0.181, 6)
    on_demand = CostModel({"cpu": "4"}, VmPrice.from_param({"on_demand_per_hour": 1.0}))
    assert on_demand.figures("j", 50, None, 3600.0, spot=False).cost_usd == 12.5


def test_a_retry_is_priced_at_its_own_pods_not_the_operators_parallelism() -> None:
    first = MODEL.figures("try-1", pods=30, queued_seconds=5.0, running_seconds=45.0, spot=True, try_number=1)
    retry = MODEL.figures("try-2", pods=2, queued_seconds=1.0, running_seconds=4.0, spot=True, try_number=2)
    summed = totals([first, retry], MODEL)
    assert summed["running_seconds"] == 49.0 and summed["queued_seconds"] == 6.0
    expected = 0.25 * 0.181 * (30 * 45 + 2 * 4) / 3600
    assert abs(summed["estimated_cost_usd"] - expected) < 1e-6
    assert summed["cost_basis"].startswith("30 pods x 45.0 s + 2 pods x 4.0 s of 0.250 Standard_D16ds_v5")
    assert "(Spot)" in summed["cost_basis"]
    assert [a["job_name"] for a in summed["attempt_figures"]] == ["try-1", "try-2"]
    assert summed["attempt_figures"][1]["pods"] == 2


def test_a_spill_job_is_priced_on_demand_beside_the_spot_one() -> None:
    spot = MODEL.figures("a", 4, 1.0, 60.0, spot=True, try_number=1)
    spill = MODEL.figures("a-spill", 4, 1.0, 60.0, spot=False, try_number=1)
    assert spill.cost_usd > spot.cost_usd
    basis = totals([spot, spill], MODEL)["cost_basis"]
    assert "(Spot)" in basis and "(on-demand)" in basis


def test_no_known_time_gives_none_not_zero() -> None:
    summed = totals([MODEL.figures("j", 3, None, None, spot=False)], MODEL)
    assert summed["queued_seconds"] is None and summed["running_seconds"] is None
    assert summed["estimated_cost_usd"] == 0.0


def test_a_jobs_own_status_gives_its_figures() -> None:
    job = {
        "metadata": {"name": "try-1", "creationTimestamp": "2026-12-02T01:00:00Z"},
        "spec": {"completions": 300, "parallelism": 30},
        "status": {
            "startTime": "2026-12-02T01:00:05Z",
            "conditions": [
                {"type": "Failed", "status": "True", "lastTransitionTime": "2026-12-02T01:00:50Z"}
            ],
        },
    }
    figures = status_figures(job, MODEL, spot=True, try_number=1)
    assert (figures.pods, figures.queued_seconds, figures.running_seconds) == (30, 5.0, 45.0)
    small = {**job, "spec": {"completions": 2, "parallelism": 30}}
    assert status_figures(small, MODEL, spot=True).pods == 2, "never more pods than indexes"
    running = {**job, "status": {"startTime": "2026-12-02T01:00:05Z"}}
    assert status_figures(running, MODEL, spot=True).running_seconds is None


def test_what_was_recorded_wins_over_the_job_object() -> None:
    recorded = MODEL.figures("try-1", 30, 5.0, 45.0, spot=True, try_number=1)
    from_job = MODEL.figures("try-1", 30, 5.0, 40.0, spot=True, try_number=1)
    other = MODEL.figures("try-2", 2, 1.0, 4.0, spot=True, try_number=2)
    assert merged([recorded], [from_job, other]) == [recorded, other]


def test_round_trip() -> None:
    figures = MODEL.figures("j", 3, 1.5, 2.5, spot=True, try_number=2)
    assert AttemptFigures.from_dict(figures.to_dict()) == figures


def test_a_job_that_never_started_waited_until_it_was_spilled() -> None:
    from datetime import datetime

    job = {
        "metadata": {"name": "first", "creationTimestamp": "2026-12-02T01:00:00Z"},
        "spec": {"completions": 8, "parallelism": 4, "suspend": True},
        "status": {},
    }
    spilled_at = datetime(2026, 12, 2, 1, 0, 30, tzinfo=UTC)
    figures = status_figures(job, MODEL, spot=True, now=spilled_at)
    assert (figures.queued_seconds, figures.running_seconds, figures.cost_usd) == (30.0, None, 0.0)


def test_a_reattached_job_keeps_the_try_that_made_it() -> None:
    """A cleared try 2 that reattaches to try 1's finished Job reports the same figures as try 1 did."""
    reported = MODEL.figures("try-1-job", 2, 0.0, 3.0, spot=False, try_number=2)
    listed = MODEL.figures("try-1-job", 2, 0.0, 2.5, spot=False, try_number=1)
    (only,) = merged([reported], [listed])
    assert only.try_number == 1 and only.running_seconds == 3.0


def test_a_jobset_prices_each_replicated_job_at_its_own_requests() -> None:
    from airflow_kueue_provider.kueue.figures.attempt_figures import GangCostModel, PodSetPrice

    gang = GangCostModel(
        (PodSetPrice("coordinator", 1, {"cpu": "1"}), PodSetPrice("workers", 8, {"cpu": "4"})), VmPrice()
    )
    spot = gang.figures("js", 10.0, 3600.0, spot=True)
    # 1 x 1/16 + 8 x 4/16 of a D16ds_v5 for an hour at the Spot price
    assert spot.pods == 9 and abs(spot.cost_usd - (1 / 16 + 8 * 4 / 16) * VmPrice().spot_per_hour) < 1e-6
    assert gang.basis([spot]).startswith("(1 coordinator pod of 0.062 + 8 workers pods of 0.250) ")
    jobset = {
        "metadata": {"name": "js-1", "creationTimestamp": "2026-12-02T01:00:00Z"},
        "status": {
            "conditions": [
                {"type": "Suspended", "status": "False", "lastTransitionTime": "2026-12-02T01:00:20Z"},
                {"type": "Completed", "status": "True", "lastTransitionTime": "2026-12-02T01:01:20Z"},
            ]
        },
    }
    earlier = status_figures(jobset, gang, spot=False, try_number=1)
    assert (earlier.queued_seconds, earlier.running_seconds, earlier.pods) == (20.0, 60.0, 9)
