"""The night's queue model: never faster than the ideal, and Jobs that fit the flavors' quota pack better."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.integration.night.workload import NightShape, draw

from .script_loader import load_script


@pytest.fixture(scope="module")
def model() -> ModuleType:
    return load_script("night_queue_model")


def test_the_model_never_beats_the_ideal_and_smaller_jobs_fill_the_flavors(model: ModuleType) -> None:
    night = draw(NightShape())  # the full night: a queue deep enough for packing to matter
    ideal = night.ideal()
    wide = model.run(night, 32, "sample-first", pod_gap=1.0, step_gap=7.0)
    narrow = model.run(night, 8, "path-first", pod_gap=1.0, step_gap=7.0)
    assert wide >= ideal and narrow >= ideal
    assert narrow < wide, (narrow, wide)  # 8-pod Jobs fit the 96 + 32 CPUs' fragments; 32-pod ones wait
    # every shard runs once: the busiest the queue can be is its quota, so the model is no faster than that
    assert model.run(night, 8, "path-first", pod_gap=0.0, step_gap=0.0) >= night.quota_bound()
