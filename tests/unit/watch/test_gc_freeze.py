"""The trigger runner's collector: frozen once at the first sync, again after a pick-up has settled."""

from __future__ import annotations

import asyncio
import gc

import pytest

from airflow_kueue_provider.watch import gc_freeze


@pytest.fixture
def freezes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(gc_freeze._State.frozen_at or 0))
    monkeypatch.setattr(gc_freeze._State, "frozen_at", None)
    monkeypatch.setattr(gc_freeze._State, "pending", None)
    monkeypatch.setattr(gc_freeze, "SETTLE_SECONDS", 0.05)
    return calls


def test_the_collector_is_frozen_once_at_the_first_sync_unless_switched_off(
    freezes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(gc_freeze.GC_FREEZE_ENV, "0")
    gc_freeze.freeze_once()
    assert freezes == []
    monkeypatch.delenv(gc_freeze.GC_FREEZE_ENV)
    gc_freeze.freeze_once()
    gc_freeze.freeze_once()
    assert freezes == [1]


def test_a_pick_up_that_doubles_the_followers_is_frozen_once_it_has_settled(freezes: list[int]) -> None:
    async def pick_up() -> None:
        gc_freeze.followers_changed(1)  # not frozen yet: nothing to do
        gc_freeze.freeze_once(1)
        for count in range(2, 1001):  # 999 more triggers arrive quickly
            gc_freeze.followers_changed(count)
        assert freezes == [1], "no freeze while triggers still arrive"
        await asyncio.sleep(0.15)
        assert freezes == [1, 1000]
        for count in range(1001, 1500):  # fewer than twice as many: the frozen state stands
            gc_freeze.followers_changed(count)
        await asyncio.sleep(0.15)
        assert freezes == [1, 1000]

    asyncio.run(pick_up())
