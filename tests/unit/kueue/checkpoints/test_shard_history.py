"""ShardHistory: merge rules, bounds, and a JSON of ids and durations only (read back or ignored)."""

from __future__ import annotations

import json

import pytest

from airflow_kueue_provider.kueue.checkpoints.shard_history import (
    HISTORY_NIGHTS,
    HISTORY_VERSION,
    MAX_HISTORY_BYTES,
    MAX_HISTORY_SHARDS,
    MAX_RUN_ID_CHARS,
    MAX_SHARD_SECONDS,
    MAX_WAIT_ERROR_SECONDS,
    HistoryShardCountMismatch,
    ShardHistory,
    history_bytes,
)
from airflow_kueue_provider.kueue.index_set import IndexSet


def _night(history: ShardHistory, run: str, seconds: dict[int, float], resumed: str = "") -> ShardHistory:
    return history.merge_night(run, history.shard_count, seconds, IndexSet.parse(resumed))


def test_a_first_night_is_learned_as_measured_to_a_tenth_of_a_second() -> None:
    history = _night(ShardHistory.empty(4), "run-1", {0: 12.345, 1: 3.0, 3: 0.01})
    learned = history.learned()
    assert learned is not None and learned.fits(4)
    assert dict(learned.seconds) == {0: 12.3, 1: 3.0, 3: 0.1} and learned.nights == ("run-1",)
    assert "learned from 1 night (run-1), 3 of 4 shards" in learned.describe()


def test_later_nights_weigh_in_as_an_exponentially_weighted_mean() -> None:
    history = _night(ShardHistory.empty(2), "run-1", {0: 10.0, 1: 10.0})
    history = _night(history, "run-2", {0: 20.0})
    assert history.seconds == (13.0, 10.0) and history.nights == ("run-1", "run-2")


def test_no_history_and_an_empty_night_learn_nothing() -> None:
    assert ShardHistory.empty(3).learned() is None
    assert _night(ShardHistory.empty(3), "run-1", {}).learned() is None


def test_a_night_of_another_shard_count_starts_over() -> None:
    history = _night(ShardHistory.empty(4), "run-1", {0: 10.0, 1: 10.0, 2: 10.0, 3: 10.0})
    other = history.merge_night("run-2", 6, {5: 2.0})
    assert other.shard_count == 6 and other.nights == ("run-2",)
    assert other.seconds == (None, None, None, None, None, 2.0)
    learned = other.learned()
    assert learned is not None and not learned.fits(4) and learned.fits(6)


def test_a_resumed_tail_never_replaces_a_full_figure_but_stands_in_until_one_comes() -> None:
    history = _night(ShardHistory.empty(3), "run-1", {0: 30.0})
    history = _night(history, "run-2", {0: 2.0, 1: 5.0}, resumed="0-1")
    assert history.seconds[0] == 30.0, "the full figure stays"
    assert history.seconds[1] == 5.0 and 1 in history.partial, "a lower bound where nothing was known"
    history = _night(history, "run-3", {1: 7.0, 2: 1.0}, resumed="1")
    assert history.seconds[1] == 7.0, "the longest tail"
    history = _night(history, "run-4", {1: 40.0})
    assert history.seconds[1] == 40.0 and 1 not in history.partial, "a full run replaces the lower bound"


def test_the_same_run_id_merged_again_is_one_night() -> None:
    history = _night(ShardHistory.empty(4), "run-1", {0: 10.0, 1: 10.0})
    history = _night(history, "run-2", {0: 20.0, 1: 20.0})
    retried = _night(history, "run-2", {0: 20.0, 1: 20.0, 2: 5.0})  # a retry: the record of 0-1 again
    assert retried.nights == ("run-1", "run-2")
    assert retried.seconds == (13.0, 13.0, 5.0, None), "shards 0-1 counted once in run-2; 2 is new"
    assert _night(retried, "run-1", {3: 99.0}) == retried, "an older night run again changes nothing"


def test_the_nights_are_capped_oldest_dropped() -> None:
    history = ShardHistory.empty(1)
    for night in range(HISTORY_NIGHTS + 5):
        history = _night(history, f"run-{night}", {0: 1.0})
    assert len(history.nights) == HISTORY_NIGHTS and history.nights[0] == "run-5"
    assert history.nights[-1] == f"run-{HISTORY_NIGHTS + 4}"


def test_above_the_shard_cap_no_lengths_are_kept() -> None:
    history = ShardHistory.empty(MAX_HISTORY_SHARDS + 1).merge_night(
        "run-1", MAX_HISTORY_SHARDS + 1, {0: 1.0}
    )
    assert history.seconds == () and history.nights == ("run-1",) and history.learned() is None
    assert ShardHistory.from_json(history.to_json()) == history


def test_a_shard_id_outside_the_count_is_refused() -> None:
    with pytest.raises(HistoryShardCountMismatch, match=r"shard ids \[4\] are outside the night's 4"):
        ShardHistory.empty(4).merge_night("run-1", 4, {4: 1.0})


def test_the_largest_history_stays_under_its_byte_bound() -> None:
    """Every shard at the figure cap, every other one partial and counted tonight (the longest interval
    strings), the nights at the run id limit: the worst case is under MAX_HISTORY_BYTES."""
    count, history = MAX_HISTORY_SHARDS, ShardHistory.empty(MAX_HISTORY_SHARDS)
    for night in range(HISTORY_NIGHTS):
        run = f"{night:02d}".ljust(MAX_RUN_ID_CHARS + 40, "x")
        history = history.merge_night(run, count, dict.fromkeys(range(count), MAX_SHARD_SECONDS * 3))
    odd = IndexSet.from_indexes(range(1, count, 2))
    errors = (-MAX_WAIT_ERROR_SECONDS,) * HISTORY_NIGHTS  # every night's forecast error at its cap
    worst = ShardHistory(count, history.seconds, history.nights, odd, odd, 3600.0, False, errors)
    assert all(s == MAX_SHARD_SECONDS for s in worst.seconds)
    assert all(len(n) == MAX_RUN_ID_CHARS for n in worst.nights)
    size = history_bytes(worst)
    assert 200_000 < size < MAX_HISTORY_BYTES, size
    assert ShardHistory.from_json(json.loads(json.dumps(worst.to_json()))) == worst


def test_the_json_holds_only_ids_and_durations_and_round_trips() -> None:
    history = _night(ShardHistory.empty(3), "scheduled__2026-12-01", {0: 4.0, 2: 1.5}, resumed="2")
    data = history.to_json()
    assert set(data) == {"version", "shard_count", "nights", "seconds", "partial", "tonight"}
    assert data == {
        "version": HISTORY_VERSION,
        "shard_count": 3,
        "nights": ["scheduled__2026-12-01"],
        "seconds": [4.0, None, 1.5],
        "partial": "2",
        "tonight": "0,2",
    }
    assert ShardHistory.from_json(json.loads(json.dumps(data))) == history


@pytest.mark.parametrize(
    "change",
    [
        {"version": 2},
        {"version": None},
        {"shard_count": 0},
        {"shard_count": True},
        {"shard_count": "3"},
        {"seconds": [1.0, 2.0]},  # not one per shard
        {"seconds": [1.0, -2.0, None]},
        {"seconds": [1.0, "2", None]},
        {"seconds": [1.0, MAX_SHARD_SECONDS * 2, None]},
        {"nights": "run-1"},
        {"nights": [f"r{i}" for i in range(HISTORY_NIGHTS + 1)]},
        {"nights": [""]},
        {"nights": [{"path": "/etc"}]},
        {"partial": "3"},  # past the shard count
        {"tonight": "x"},
        {"partial": None},
        {"output": {"result": 1}},  # nothing but ids and durations is read
        {"pod_start_seconds": -1.0},
        {"pod_start_seconds": True},
        {"pod_start_seconds": "5"},
        {"from_pods": "yes"},
    ],
)
def test_anything_else_is_ignored_not_trusted(change: dict[str, object]) -> None:
    good = _night(ShardHistory.empty(3), "run-1", {0: 4.0}).to_json()
    assert ShardHistory.from_json(good) is not None
    assert ShardHistory.from_json({**good, **change}) is None


def test_pods_that_cost_nothing_beside_their_shards_read_back() -> None:
    """Found on the bed: whole-second pod times can fill an attempt's running time, so the learned pod cost
    is 0.0; the reader refused the 0 its writer wrote, and the history was lost to the next night."""
    history = ShardHistory.empty(2).merge_night("run-1", 2, {0: 3.0, 1: 2.0}, pod_start=0.0)
    assert history.pod_start == 0.0
    assert ShardHistory.from_json(json.loads(json.dumps(history.to_json()))) == history


@pytest.mark.parametrize("data", [None, [], "{}", {"version": 1}, {"seconds": [1.0] * 10}])
def test_non_histories_are_ignored(data: object) -> None:
    assert ShardHistory.from_json(data) is None


def test_a_blob_over_the_byte_bound_is_ignored() -> None:
    data = _night(ShardHistory.empty(3), "run-1", {0: 4.0}).to_json()
    data["padding"] = "x" * MAX_HISTORY_BYTES
    assert ShardHistory.from_json(data) is None


def test_lengths_from_pod_times_serve_the_forecast_but_never_packing() -> None:
    """A program without the SDK runs one shard per index: its pods' times may forecast, never pack."""
    pods = ShardHistory.empty(2).merge_night("run-1", 2, {0: 3.0, 1: 2.0}, from_pods=True)
    learned = pods.learned()
    assert learned is not None and not learned.packable and pods.to_json()["from_pods"] is True
    assert ShardHistory.from_json(json.loads(json.dumps(pods.to_json()))) == pods
    retried = pods.merge_night("run-1", 2, {1: 2.0})  # a retry of the same night, timed otherwise
    assert retried.from_pods, "the same night still ran without the SDK"
    sdk = pods.merge_night("run-2", 2, {0: 3.0, 1: 2.0})
    assert not sdk.from_pods and "from_pods" not in sdk.to_json()
    assert sdk.learned() is not None and sdk.learned().packable  # type: ignore[union-attr]
    assert pods.merge_night("run-2", 2, {}).from_pods, "a night that timed nothing says nothing"


def test_a_nights_forecast_error_is_kept_beside_it_and_learned_as_the_nights_median() -> None:
    history = _night(ShardHistory.empty(2), "run-1", {0: 10.0, 1: 10.0})
    assert history.wait_bias() is None and "wait_errors" not in history.to_json()
    history = history.merge_wait_error("run-1", 2, 160.04)
    assert history.wait_errors == (160.0,) and history.wait_bias() == 160.0
    learned = history.learned()
    assert learned is not None and learned.wait_bias_seconds == 160.0
    again = history.merge_wait_error("run-1", 2, 100.0)  # a retry of the same night replaces its figure
    assert again.wait_errors == (100.0,) and again.nights == ("run-1",)
    history = _night(history, "run-2", {0: 10.0})
    assert history.wait_errors == (160.0, None) and history.wait_bias() == 160.0
    history = history.merge_wait_error("run-2", 2, 60.0)
    assert history.wait_bias() == 110.0, "the median of two: their mean"
    assert history.merge_wait_error("run-1", 2, 0.0) == history, "an older night is not taken again"
    assert ShardHistory.from_json(json.loads(json.dumps(history.to_json()))) == history


def test_a_forecast_error_of_a_night_not_recorded_yet_adds_it_and_another_count_starts_over() -> None:
    history = _night(ShardHistory.empty(2), "run-1", {0: 10.0})
    later = history.merge_wait_error("run-2", 2, -20.0)
    assert later.nights == ("run-1", "run-2") and later.wait_errors == (None, -20.0)
    assert later.tonight == IndexSet(), "the new night has counted no shard yet"
    merged = _night(later, "run-2", {0: 20.0})  # the night's lengths, after: the same night
    assert merged.nights == ("run-1", "run-2") and merged.wait_errors == (None, -20.0)
    assert merged.seconds[0] == 13.0
    other = merged.merge_wait_error("run-3", 3, 5.0)
    assert (other.shard_count, other.nights, other.wait_errors) == (3, ("run-3",), (5.0,))
    assert merged.merge_wait_error("run-2", 2, float("nan")) == merged


def test_forecast_errors_stay_aligned_with_the_capped_nights_and_are_capped() -> None:
    history = ShardHistory.empty(1)
    for night in range(HISTORY_NIGHTS + 3):
        history = _night(history, f"run-{night}", {0: 1.0}).merge_wait_error(f"run-{night}", 1, 1e12)
    assert len(history.nights) == len(history.wait_errors) == HISTORY_NIGHTS
    assert set(history.wait_errors) == {MAX_WAIT_ERROR_SECONDS}


@pytest.mark.parametrize(
    "errors",
    [[1.0], [1.0, 2.0, 3.0], ["1"], [True, None], [MAX_WAIT_ERROR_SECONDS * 2, None], {"a": 1}],
)
def test_forecast_errors_that_break_a_rule_make_the_history_unread(errors: object) -> None:
    data = _night(ShardHistory.empty(1), "run-1", {0: 1.0})
    data = _night(data, "run-2", {0: 1.0}).to_json()
    data["wait_errors"] = errors
    assert ShardHistory.from_json(data) is None
    data["wait_errors"] = [None, None]  # nothing known: read as none at all
    assert ShardHistory.from_json(data) is not None and ShardHistory.from_json(data).wait_errors == ()  # type: ignore[union-attr]


def test_the_learned_wait_is_the_median_of_the_last_nights_so_one_outage_does_not_move_it() -> None:
    history = ShardHistory.empty(1)
    for night, error in enumerate([500.0, 30.0, 40.0, 3600.0, 35.0, 45.0]):
        history = _night(history, f"run-{night}", {0: 1.0}).merge_wait_error(f"run-{night}", 1, error)
    assert history.wait_bias() == 40.0, "the last five: 30, 40, 3600, 35, 45 (the first is past them)"
