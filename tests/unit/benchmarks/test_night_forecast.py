"""The night's forecast section: |error| over the time each forecast covered, median and p90 per step."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from .script_loader import load_script


@pytest.fixture(scope="module")
def night_forecast() -> ModuleType:
    return load_script("night_forecast")


def result(error: float, covered: float, nights: int = 2) -> dict[str, Any]:
    made = "2026-12-01T01:00:00+00:00"
    minutes, seconds = divmod(int(covered), 60)
    ended = f"2026-12-01T01:{minutes:02d}:{seconds:02d}+00:00"
    forecast = {"made_at": made, "actual_finish": ended, "error_seconds": error, "nights": nights}
    return {"completed_indexes": "0-3", "forecast": forecast}


def test_errors_as_shares_of_the_time_covered_median_and_p90(night_forecast: ModuleType) -> None:
    results = {f"night_genomics|sample.align|{i}": result(6.0 * (i + 1), 600) for i in range(10)}
    results["night_genomics|sample.call|0"] = result(-120.0, 600)
    results["night_risk|risk|0"] = {"completed_indexes": "0"}  # no forecast: left out
    text = night_forecast.section([{"system": "ours", "results": results}])
    # align: 1 % .. 10 % of 600 s; median (nearest rank) 5 %, p90 9 %
    assert (
        "| ours | night_genomics|sample.align | 10 | 5.0% | 9.0% | 10.0% | 5.0% | 9.0% | 0.0 | +33.0 | 2 |"
        in text
    )
    assert (
        "| ours | night_genomics|sample.call | 1 | 20.0% | 20.0% | 20.0% | 20.0% | 20.0% | 0.0 | -120.0 | 2 |"
        in text
    )
    assert "ours, once queued: median 6.0%, p90 10.0% over 11 tasks: within the bar." in text
    assert "ours, before the create: median 6.0%, p90 10.0% over 11 tasks: within the bar." in text


def test_the_forecast_made_again_once_queued_beside_the_one_before_the_create(
    night_forecast: ModuleType,
) -> None:
    queued = result(6.0, 600)
    first = {"made_at": "2026-12-01T00:59:58+00:00", "error_seconds": 301.0}  # 2 s before, 50 % off
    queued["forecast"]["at_submit"] = first
    text = night_forecast.section([{"system": "ours", "results": {"d|sample.align|0": queued}}])
    assert "| ours | d|sample.align | 1 | 1.0% | 1.0% | 1.0% | 50.0% | 50.0% | 2.0 | +6.0 | 2 |" in text
    assert "ours, before the create: median 50.0%, p90 50.0% over 1 tasks: outside the bar." in text


def test_a_night_without_forecasts_adds_nothing(night_forecast: ModuleType) -> None:
    assert night_forecast.section([{"system": "ours", "results": {"a|b|0": {"x": 1}}}]) == ""
    assert night_forecast.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
