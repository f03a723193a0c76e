"""A trigger written by this version loads in the previous one (a rolling upgrade, a rollback): without the
capabilities a kind gained since, it serializes exactly the previous version's keys."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
from airflow_kueue_provider.triggers.kueue_jobset import KueueJobSetTrigger

PREVIOUS = Path(__file__).parents[2] / "integration" / "triggers" / "previous_main"


def _previous(name: str) -> tuple[str, dict[str, object]]:
    classpath, kwargs = json.loads((PREVIOUS / name).read_text())
    return classpath, kwargs


def test_each_kind_serializes_the_previous_versions_keys() -> None:
    for name, kind in (
        ("jobset.json", KueueJobSetTrigger),
        ("job_ramp_deadline_ledger.json", KueueJobTrigger),
    ):
        classpath, kwargs = _previous(name)
        again_classpath, again = kind(**kwargs).serialize()  # type: ignore[arg-type]
        assert again_classpath == classpath
        assert set(again) == set(kwargs), name
