"""``UserSlots``: the one counter behind the UI's stream and read caps."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.plugins.user_slots import UserSlots, Wording


class Full(Exception):
    pass


WORDING = Wording("things", "open", "close one", "try again later", Full)


def test_slots_stop_at_the_users_cap_then_the_total_and_a_release_counts_once() -> None:
    slots = UserSlots(per_user=2, total=3, options=("a_per_user", "a_total"), wording=WORDING)
    first, _ = slots.acquire("alice"), slots.acquire("alice")
    with pytest.raises(
        Full,
        match=r"^2 things of yours are already open \(at most 2 a user: \[kueue\] a_per_user\); close one",
    ):
        slots.acquire("alice")
    slots.acquire("bob")
    with pytest.raises(
        Full, match=r"^3 things are already open on this API server \(at most 3: \[kueue\] a_total\)"
    ):
        slots.acquire("carol")
    first()
    first()  # idempotent
    assert slots.taken("alice") == 1 and slots.taken_total == 2 and slots.users == 2


def test_a_cap_below_one_names_its_option() -> None:
    with pytest.raises(ValueError, match=r"\[kueue\] a_total must be at least 1, got 0"):
        UserSlots(per_user=1, total=0, options=("a_per_user", "a_total"), wording=WORDING)
