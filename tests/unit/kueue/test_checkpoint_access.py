"""Shard containers and pod credential windows (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.checkpoint_access import (
    CLOCK_SKEW,
    credential_window,
    is_container_name,
    is_shard_container_of,
    shard_container_name,
)
from airflow_kueue_provider.kueue.ledger import ledger_prefix

ids = st.text(min_size=1, max_size=300)
bases = st.from_regex(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}", fullmatch=True)


@given(
    bases, st.tuples(ids, ids, ids, st.integers(-1, 5000)), st.tuples(ids, ids, ids, st.integers(-1, 5000))
)
def test_two_task_instances_never_share_a_shard_container(
    base: str, one: tuple[str, str, str, int], other: tuple[str, str, str, int]
) -> None:
    first, second = (
        shard_container_name(base, ledger_prefix(*one)),
        shard_container_name(base, ledger_prefix(*other)),
    )
    assert is_container_name(first) and is_container_name(second)
    assert is_shard_container_of(base, first)
    assert (first == second) == (ledger_prefix(*one) == ledger_prefix(*other))
    assert first != base, "checkpoints never share the ledgers' container"


def test_a_long_base_is_cut_to_fit_azures_63_characters() -> None:
    name = shard_container_name("a" * 40 + "-" + "b" * 22, "d/r/t")
    assert len(name) == 63 and is_container_name(name)
    assert not is_shard_container_of("other", name)


@pytest.mark.parametrize("bad", ["ab", "A-b-c", "a--b", "-abc", "abc-", "a_b_c", "a" * 64])
def test_invalid_base_containers_are_refused(bad: str) -> None:
    assert not is_container_name(bad)
    with pytest.raises(ValueError, match="not a valid Blob container name"):
        shard_container_name(bad, "d/r/t")


def test_the_credential_window_starts_early_and_is_bounded() -> None:
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert credential_window(now, timedelta(hours=48)) == (now - CLOCK_SKEW, now + timedelta(hours=48))
    for ttl in (timedelta(0), timedelta(days=7, seconds=1)):
        with pytest.raises(ValueError, match="credential_ttl"):
            credential_window(now, ttl)
