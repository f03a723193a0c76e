"""Checkpoint blob names, their sequence numbers and which old ones to prune."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.worker import naming


def test_names() -> None:
    assert naming.checkpoint_name("dag/run/task", 7, 3) == "dag/run/task/shards/7/checkpoint-00000003.json"
    assert naming.done_name("/dag/run/task/", 7) == "dag/run/task/shards/7/done.json"
    assert naming.shard_folder("", 1) == "shards/1/"
    assert naming.checkpoint_name("p", 0, 123_456_789).endswith("checkpoint-123456789.json")


@pytest.mark.parametrize(
    ("name", "seq"),
    [
        ("p/shards/7/checkpoint-00000003.json", 3),
        ("checkpoint-123456789.json", 123456789),
        ("p/shards/7/done.json", None),
        ("p/shards/7/checkpoint-3.json", None),
        ("p/shards/7/checkpoint-00000003.json.tmp", None),
    ],
)
def test_seq_is_parsed_only_from_checkpoint_names(name: str, seq: int | None) -> None:
    assert naming.checkpoint_seq(name) == seq


def test_names_sort_like_their_numbers() -> None:
    names = [naming.checkpoint_name("p", 1, s) for s in (10, 9, 100, 1)]
    assert [naming.checkpoint_seq(n) for n in sorted(names)] == [1, 9, 10, 100]


def test_stale_keeps_the_newest() -> None:
    assert naming.stale_seqs([5, 1, 3, 2, 4], keep=3) == [1, 2]
    assert naming.stale_seqs([1, 2], keep=3) == []
    with pytest.raises(ValueError):
        naming.stale_seqs([1], keep=0)


def test_stale_by_rank_keeps_the_best_not_the_newest() -> None:
    progress = {1: 90, 2: 10, 3: 20, 4: None, 5: 20}
    by_progress = naming.stale_seqs(progress, keep=2, rank=lambda s: naming.rank(progress[s], s))
    assert by_progress == [2, 3, 4]  # 90 (seq 1) and the newer of the two 20s stay
    assert naming.stale_seqs(progress, keep=1, rank=lambda s: naming.rank(progress[s], s)) == [2, 3, 4, 5]


def test_rank_orders_progress_then_seq_and_puts_missing_progress_last() -> None:
    pairs = [(None, 9), (0, 1), (2.5, 2), (2.5, 3), (None, 10), (-1, 8)]
    ranked = sorted(pairs, key=lambda p: naming.rank(*p))
    assert ranked == [(None, 9), (None, 10), (-1, 8), (0, 1), (2.5, 2), (2.5, 3)]


@pytest.mark.parametrize("prefix", ["a//b", "a/../b", "./a"])
def test_bad_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="path segment"):
        naming.shard_folder(prefix, 1)


def test_negative_ids_are_refused() -> None:
    with pytest.raises(ValueError):
        naming.shard_folder("p", -1)
    with pytest.raises(ValueError):
        naming.checkpoint_name("p", 1, 0)
