"""Per-index states for the UI grid."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.plugins.views.index_grid import (
    MAX_BANDS,
    IndexRun,
    IndexState,
    index_grid,
    shard_grid,
)


def job(completions: int, completed: str = "", failed: str = "") -> dict[str, Any]:
    return {
        "spec": {"completions": completions},
        "status": {"completedIndexes": completed, "failedIndexes": failed},
    }


def test_every_index_in_exactly_one_state_in_index_order() -> None:
    grid = index_grid(job(10, completed="0-3,7", failed="5"), running=IndexSet.parse("4,7,8"))
    assert grid.counts() == {"done": 5, "failed": 1, "running": 2, "waiting": 2}
    assert grid.runs() == [
        IndexRun(0, 3, IndexState.DONE),
        IndexRun(4, 4, IndexState.RUNNING),
        IndexRun(5, 5, IndexState.FAILED),
        IndexRun(6, 6, IndexState.WAITING),
        IndexRun(7, 7, IndexState.DONE),  # a pod still terminating does not make it running again
        IndexRun(8, 8, IndexState.RUNNING),
        IndexRun(9, 9, IndexState.WAITING),
    ]


def test_a_huge_job_stays_a_few_runs() -> None:
    grid = index_grid(job(100_000, completed="0-49999"), running=IndexSet.parse("50000-50049"))
    assert [(r.first, r.last, r.state.value) for r in grid.runs()] == [
        (0, 49999, "done"),
        (50000, 50049, "running"),
        (50050, 99999, "waiting"),
    ]
    assert grid.to_dict()["counts"]["waiting"] == 49950


def test_a_job_without_status_is_all_waiting() -> None:
    grid = index_grid({"spec": {"completions": 3}}, running=IndexSet())
    assert grid.to_dict() == {
        "completions": 3,
        "unit": "index",
        "counts": {"done": 0, "failed": 0, "running": 0, "waiting": 3},
        "coarse": False,
        "runs": [{"first": 0, "last": 2, "state": "waiting"}],
    }


@given(
    st.integers(0, 300),
    st.sets(st.integers(0, 320)),
    st.sets(st.integers(0, 320)),
    st.sets(st.integers(0, 320)),
)
def test_runs_partition_the_indexes(n: int, done: set[int], failed: set[int], running: set[int]) -> None:
    grid = index_grid(
        job(n, completed=str(IndexSet.from_indexes(done)), failed=str(IndexSet.from_indexes(failed))),
        running=IndexSet.from_indexes(running),
    )
    covered = [i for run in grid.runs() for i in range(run.first, run.last + 1)]
    assert covered == list(range(n))
    assert sum(grid.counts().values()) == n


def test_a_fragmented_huge_job_is_drawn_in_at_most_max_bands_that_hide_no_failure() -> None:
    every_other = str(IndexSet.from_indexes(range(0, 100_000, 2)))
    grid = index_grid(job(100_000, completed=every_other, failed="99999"), running=IndexSet.parse("1,3"))
    bands = grid.bands()
    width = 100_000 // MAX_BANDS
    assert len(bands) == MAX_BANDS
    assert [(b.first, b.last) for b in bands[:2]] == [(0, width - 1), (width, 2 * width - 1)]
    assert bands[0].state is IndexState.RUNNING and bands[0].counts[IndexState.DONE] == width // 2
    assert bands[1].state is IndexState.DONE and sum(bands[1].counts.values()) == width
    assert bands[-1].state is IndexState.FAILED
    assert sum(n for b in bands for n in b.counts.values()) == 100_000
    as_dict = grid.to_dict()
    assert as_dict["coarse"] is True and len(as_dict["runs"]) == MAX_BANDS
    assert as_dict["runs"][-1]["counts"] == {"done": width // 2, "waiting": width // 2 - 1, "failed": 1}


def test_a_grid_with_few_runs_is_not_coarse() -> None:
    as_dict = index_grid(job(10, completed="0-4"), running=IndexSet()).to_dict()
    assert as_dict["coarse"] is False
    assert as_dict["runs"] == [
        {"first": 0, "last": 4, "state": "done"},
        {"first": 5, "last": 9, "state": "waiting"},
    ]


def test_likely_running_is_the_lowest_unfinished_indexes_as_many_as_active_pods() -> None:
    from airflow_kueue_provider.plugins.views.index_grid import likely_running

    def job(active: int, completed: str = "", failed: str = "", completions: int = 10) -> dict[str, object]:
        status = {"active": active, "completedIndexes": completed, "failedIndexes": failed}
        return {"spec": {"completions": completions}, "status": status}

    assert str(likely_running(job(3, completed="0-1,4", failed="3"))) == "2,5,6"
    assert str(likely_running(job(0, completed="0-1"))) == ""
    assert str(likely_running(job(20, completed="0-7"))) == "8,9", "never more than the unfinished"
    big = likely_running(job(500, completed="0-49999", completions=100_000))
    assert str(big) == "50000-50499"


def test_a_packed_retry_is_drawn_per_shard_with_the_pod_index_that_runs_each() -> None:
    """A retry of shards 7, 42 and 50-57 packed 4 to a pod: 3 Job indexes, 10 shards."""
    packs = ShardPacks(IndexSet.parse("7,42,50-57"), per_pod=4)
    job = {"spec": {"completions": 3}, "status": {"completedIndexes": "0", "failedIndexes": "2"}}
    grid = shard_grid(index_grid(job, running=IndexSet.parse("1")), packs)
    assert grid.completions == 10
    assert grid.counts() == {"done": 4, "failed": 2, "running": 4, "waiting": 0}
    cells = [cell for run in grid.runs() for cell in grid.cells(run)]
    assert cells[:2] == [("shard 7, pod index 0", 0), ("shard 42, pod index 0", 0)]
    assert cells[-1] == ("shard 57, pod index 2", 2)
    assert [run.state.value for run in grid.runs()] == ["done", "running", "failed"]
    assert grid.span(grid.bands()[2]) == "shards 56,57"
    as_dict = grid.to_dict()
    assert (as_dict["unit"], as_dict["shards"], as_dict["per_pod"]) == ("shard", "7,42,50-57", 4)


def test_decreasing_packs_are_drawn_per_shard_with_the_pod_index_that_runs_each() -> None:
    """Shards 0-9 as packs of 4, 2, 2, 1, 1: index 1 failed (shards 4-5), index 4 runs (shard 9)."""
    packs = ShardPacks.parse(IndexSet.range(0, 10), "4x1,2x2,1x2")
    job = {"spec": {"completions": 5}, "status": {"completedIndexes": "0,2-3", "failedIndexes": "1"}}
    grid = shard_grid(index_grid(job, running=IndexSet.parse("4")), packs)
    assert grid.counts() == {"done": 7, "failed": 2, "running": 1, "waiting": 0}
    cells = [cell for run in grid.runs() for cell in grid.cells(run)]
    assert [index for _, index in cells] == [0, 0, 0, 0, 1, 1, 2, 2, 3, 4]
    assert cells[8] == ("shard 8, pod index 3", 3)
    assert grid.to_dict()["packs"] == "4x1,2x2,1x2"


def test_an_index_grid_labels_its_cells_with_indexes() -> None:
    grid = index_grid({"spec": {"completions": 2}, "status": {"completedIndexes": "1"}}, running=IndexSet())
    assert [cell for run in grid.runs() for cell in grid.cells(run)] == [("index 0", 0), ("index 1", 1)]
    assert grid.span(grid.bands()[0]) == "indexes 0-0"
