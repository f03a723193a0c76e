"""The plugin's unit tests read with fake hooks: the shared Events index must not start feeds on them."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.plugins import dashboard_data
from airflow_kueue_provider.watch.event_index import EventIndex


@pytest.fixture(autouse=True)
def _events_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard_data, "EVENTS", EventIndex(max_feeds=0))  # every read a LIST
