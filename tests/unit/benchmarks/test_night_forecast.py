"""The night's forecast section: |error| over the time each forecast covered, median and p90 per step."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "night_forecast.py"


@pytest.fixture(scope="module")
def night_forecast() -> ModuleType:
    spec = importlib.util.spec_from_file_location("night_forecast", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["night_forecast"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


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
    assert "| ours | night_genomics|sample.align | 10 | 5.0% | 9.0% | 10.0% | +33.0 | 2 |" in text
    assert "| ours | night_genomics|sample.call | 1 | 20.0% | 20.0% | 20.0% | -120.0 | 2 |" in text
    assert "ours: median 6.0%, p90 10.0% over 11 tasks: within the bar." in text


def test_a_night_without_forecasts_adds_nothing(night_forecast: ModuleType) -> None:
    assert night_forecast.section([{"system": "ours", "results": {"a|b|0": {"x": 1}}}]) == ""
    assert night_forecast.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
