"""The bed's books of the worker SDK's hand-off (``tests/integration/night/pack_handoff``): who takes a
stopped pod's rest, when each shard runs, and whose end moves."""

from __future__ import annotations

import pytest

from tests.integration.night.pack_handoff import TAKE_OVER_SECONDS, PackHandOff, Shard

KEY = ("shards", "night/run-1/align/0")
PACKS: dict[int, list[Shard]] = {  # index -> its pack: (shard, seconds)
    0: [(0, 1.0), (1, 2.0), (2, 3.0)],
    1: [(3, 4.0), (4, 4.0), (5, 4.0)],
    2: [(6, 4.0), (7, 4.0), (8, 5.0)],
}


def running(books: PackHandOff, uid: str, index: int, at: float = 0.0) -> None:
    books.seen(uid, KEY, index, list(PACKS[index]), set(), at)
    books.running(uid, at)


def test_a_pod_about_to_end_takes_nothing_and_the_shard_stays_for_the_owner_s_next_pod() -> None:
    books = PackHandOff()
    running(books, "a", 0)
    books.seen("b", KEY, 1, [(3, 6.5)], set(), 0.0)
    books.running("b", 0.0)  # ends at 6.5: within a second of the stop
    finished, moved = books.stopping("a", running_for=5.8, now=5.8) or ([], set())
    assert finished == [(0, 1.0), (1, 2.0)] and moved == set() and books.handed_off == 0
    assert books.plans["b"].run == [(3, 6.5)]
    plan, _ = books.seen("a2", KEY, 0, list(PACKS[0]), {0, 1}, 16.0)
    assert plan.run == [(2, 3.0)] and plan.waits == set()


def test_the_owner_s_next_pod_takes_back_its_queued_shards_and_the_peer_s_later_take_overs_move_up() -> None:
    books = PackHandOff()
    running(books, "a", 0)
    running(books, "b", 1)
    books.stopping("a", running_for=0.5, now=0.5)  # 0, 1, 2 to b, from 12.05
    running(books, "c", 2, at=0.5)
    books.stopping("c", running_for=0.5, now=1.0)  # 6, 7, 8 to b, after them
    assert [s for s, _ in books.plans["b"].run] == [3, 4, 5, 0, 1, 2, 6, 7, 8]
    assert books.handed_off == 6
    end_before = books.plans["b"].work_end
    plan, moved = books.seen("a2", KEY, 0, list(PACKS[0]), set(), 12.5)
    assert plan.run == [(1, 2.0), (2, 3.0)] and plan.waits == {0}  # shard 0 runs in b since 12.05
    assert moved == {"a2", "b"} and books.handed_off == 4
    b = books.plans["b"]
    assert [s for s, _ in b.run] == [3, 4, 5, 0, 6, 7, 8]
    shift = 2.0 + 3.0 + 2 * TAKE_OVER_SECONDS
    assert b.work_end == pytest.approx(end_before - shift)
    assert b.times[6] == pytest.approx((13.05 + TAKE_OVER_SECONDS, 13.05 + TAKE_OVER_SECONDS + 4.0))
    assert books.remaining("a2", 12.5) == 5.0  # its two shards; shard 0 is done at 13.05, before them


def test_the_owner_s_next_pod_and_the_job_s_running_pods_share_what_nobody_started() -> None:
    books = PackHandOff()
    running(books, "a", 0)
    running(books, "b", 1)  # its work ends at 12
    running(books, "c", 2)  # at 13
    books.stopping("a", running_for=0.5, now=0.5)  # 0 to b from 12.05, 1 to c from 13.05, 2 to b
    plan, moved = books.seen("a2", KEY, 0, list(PACKS[0]), set(), 10.5)
    # Nobody started them yet: a2 (free at 10.5) runs 0 and 1; b, free at 12, takes 2 sooner than a2 could.
    assert plan.run == [(0, 1.0), (1, 2.0)] and plan.waits == {2}
    assert [s for s, _ in books.plans["b"].run] == [3, 4, 5, 2] and books.plans["c"].run == PACKS[2]
    assert moved == {"a2", "b", "c"} and books.handed_off == 1
    assert books.remaining("a2", 10.5) == pytest.approx(12.0 + TAKE_OVER_SECONDS + 3.0 - 10.5)


def test_a_pod_that_succeeds_before_a_shard_it_took_over_ends_did_not_run_it() -> None:
    books = PackHandOff()
    running(books, "a", 0)
    running(books, "b", 1)
    running(books, "c", 2)
    books.stopping("a", running_for=2.0, now=2.0)  # 1 to b (12.05-14.05), 2 to c (13.05-16.05)
    ran, late, moved = books.succeeded("b", now=12.0) or ([], [], set())  # its patch came too late
    assert ran == PACKS[1] and late == [(1, 2.0)]
    assert moved == {"c"} and [s for s, _ in books.plans["c"].run] == [6, 7, 8, 2, 1]


def test_a_pod_lost_without_a_word_keeps_its_finished_take_overs_and_its_owner_s_pod_gets_the_rest() -> None:
    books = PackHandOff()
    running(books, "a", 0)
    running(books, "b", 1)
    books.stopping("a", running_for=0.5, now=0.5)  # 0 (12.05-13.05), 1 (13.1-15.1), 2 (15.15-18.15) to b
    plan, _ = books.seen("a2", KEY, 0, list(PACKS[0]), set(), 14.0)  # waits for 0 and 1, runs 2
    assert plan.waits == {0, 1} and plan.run == [(2, 3.0)]
    finished, moved = books.ended("b", now=14.0)
    assert finished == [(0, 1.0)] and moved == {"a2"}
    assert books.plans["a2"].run == [(2, 3.0), (1, 2.0)] and books.plans["a2"].waits == {0}


def test_only_an_end_moved_past_the_tolerance_is_patched_and_with_the_value_at_send_time() -> None:
    books = PackHandOff()
    running(books, "a", 0)
    running(books, "b", 1)
    assert books.to_patch({"a", "b"}, 1.0) == []
    books.plans["b"].work_end += 0.1
    assert books.to_patch({"b"}, 1.0) == []
    books.plans["b"].work_end += 1.0
    assert books.to_patch({"b"}, 1.0) == ["b"]
    assert books.remaining("b", 2.0) == pytest.approx(12.0 + 1.1 - 2.0)
    assert books.remaining("gone", 2.0) is None
