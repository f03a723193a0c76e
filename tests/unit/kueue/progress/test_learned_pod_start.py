"""A pod's cost beside its shards, learned from a clean attempt and used by the forecast and packing."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.checkpoints.history_packing import packs_from_history
from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.kueue.checkpoints.shard_history import ShardHistory
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.forecast import (
    POD_START_SECONDS,
    Resources,
    job_work,
    makespan,
    start_cost_of,
)


@pytest.mark.parametrize("cost", [0.0, 1.5, 7.0, 23.0])
def test_the_start_cost_is_the_inverse_of_the_makespan(cost: float) -> None:
    packs = [10.0, 4.0, 7.0, 3.0, 3.0, 9.0]
    measured = makespan(packs, 3, cost)
    assert start_cost_of(packs, 3, measured) == pytest.approx(cost, abs=0.1)
    assert start_cost_of([], 3, 10.0) is None and start_cost_of(packs, 3, 0.0) is None
    assert start_cost_of(packs, 3, 1.0) == 0.0  # faster than the packs alone: nothing to learn beyond 0


def test_the_history_weighs_the_pod_cost_over_nights_and_reads_back_old_blobs() -> None:
    history = ShardHistory.empty(2).merge_night("n1", 2, {0: 5.0, 1: 5.0}, pod_start=10.0)
    history = history.merge_night("n2", 2, {0: 5.0, 1: 5.0}, pod_start=0.0)
    assert history.pod_start == pytest.approx(7.0)  # 10 + 0.3 x (0 - 10)
    learned = history.learned()
    assert learned is not None and learned.pod_start_seconds == pytest.approx(7.0)
    assert "pods start in about 7 s" in learned.describe()
    assert ShardHistory.from_json(history.to_json()) == history
    old = {k: v for k, v in history.to_json().items() if k != "pod_start_seconds"}
    read = ShardHistory.from_json(old)
    assert read is not None and read.pod_start is None  # a blob of the previous version still reads
    assert ShardHistory.from_json({**history.to_json(), "pod_start_seconds": -1}) is None
    assert ShardHistory.from_json({**history.to_json(), "pod_start_seconds": 1e9}) is None


def test_the_forecast_uses_the_learned_pod_cost_and_packing_its_tail_rule() -> None:
    packs = ShardPacks(IndexSet.range(0, 4))
    pod = Resources(cpu=1, pods=1)
    learned = LearnedLengths(4, dict.fromkeys(range(4), 5.0), ("n1",), pod_start_seconds=1.5)
    work = job_work(packs, 2, pod, learned, None)
    assert work is not None and work.start_cost == 1.5 and "pods start in about 1.5 s" in work.source
    unlearned = job_work(packs, 2, pod, LearnedLengths(4, dict.fromkeys(range(4), 5.0)), None)
    assert unlearned is not None and unlearned.start_cost == POD_START_SECONDS
    # 40 shards of 60 s on 8 slots: the slowest pack's overrun (~2 x 10 % of its work) is about 33 s; worth a
    # tail only when two pod starts cost less than that.
    lengths = dict.fromkeys(range(40), 60.0)
    slow = packs_from_history(IndexSet.range(0, 40), LearnedLengths(40, lengths, (), 20.0), None, 8)
    quick = packs_from_history(IndexSet.range(0, 40), LearnedLengths(40, lengths, (), 1.0), None, 8)
    assert slow is not None and slow.index_count == 8  # one wave: a tail pod would cost more than it saves
    assert quick is not None and quick.index_count > 8
