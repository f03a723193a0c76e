"""The hand-off's waits at test speed: a stopped pod looks for its released shards every 10 ms and leaves
one nobody claims after 50 ms (``pack_handoff``; tests of those waits set their own)."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.worker import pack_handoff


@pytest.fixture(autouse=True)
def quick_grace_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pack_handoff, "GRACE_POLL_SECONDS", 0.01)
    monkeypatch.setattr(pack_handoff, "UNCLAIMED_SECONDS", 0.05)
