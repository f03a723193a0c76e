"""The field selector of a kind's Events: the apiserver leaves the skipped reasons out."""

from __future__ import annotations

from airflow_kueue_provider.hooks.sync_events import kind_selector


def test_a_kinds_events_without_the_skipped_reasons() -> None:
    assert kind_selector("Workload") == "involvedObject.kind=Workload"
    assert kind_selector("Job", ["SuccessfulCreate", "SuccessfulDelete"]) == (
        "involvedObject.kind=Job,reason!=SuccessfulCreate,reason!=SuccessfulDelete"
    )
