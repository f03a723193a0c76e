"""Staged shard items (pure): the JSON-lines blob read line by line (errors name the line, never its text),
the chunks the pods read, and each shard's item found in its chunk."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name, done_shard_ids, shards_folder
from airflow_kueue_provider.kueue.checkpoints.shard_item_chunks import (
    ITEMS_PER_CHUNK,
    chunk_name,
    chunks,
    item_of_chunk,
    parse_jsonl,
    staged_index_name,
)
from airflow_kueue_provider.kueue.spec.shard_items import MAX_ITEM_BYTES, InvalidShardItems


def test_json_lines_are_one_item_each_and_trailing_blank_lines_end_it() -> None:
    assert parse_jsonl(b'"a"\n{"f": 1}\n[1, 2]\nnull\n\n', "c/items.jsonl") == ["a", {"f": 1}, [1, 2], None]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "holds no items"),
        (b'"a"\n\n"b"\n', "line 2 \\(item 1\\) is not one JSON value"),
        (b'"a"\n{"password": "hunter2"\n', "line 2 \\(item 1\\) is not one JSON value"),
        (b'"a"\n\xff\n', "is not UTF-8"),
        (b'"' + b"x" * MAX_ITEM_BYTES + b'"\n', "line 1 \\(item 0\\) is over"),
    ],
)
def test_a_bad_blob_is_refused_naming_the_line(data: bytes, says: str) -> None:
    with pytest.raises(InvalidShardItems, match=says) as refused:
        parse_jsonl(data, "c/items.jsonl")
    assert "hunter2" not in str(refused.value)


def test_chunks_sit_beside_the_shards_folder_and_hold_their_first_shard_id() -> None:
    items = list(range(ITEMS_PER_CHUNK + 3))
    staged = dict(chunks("/dag/run/task/", items))
    assert list(staged) == ["dag/run/task/shards/items/0.json", "dag/run/task/shards/items/1.json"]
    assert staged["dag/run/task/shards/items/1.json"] == {
        "first": ITEMS_PER_CHUNK,
        "items": [1000, 1001, 1002],
    }
    assert chunk_name("dag/run/task", ITEMS_PER_CHUNK + 2) == "dag/run/task/shards/items/1.json"
    assert staged_index_name("dag/run/task") == "dag/run/task/shards/items/index.json"
    name = chunk_name("dag/run/task", 1002)
    assert item_of_chunk(staged[name], 1002, name) == 1002


def test_a_missing_chunk_or_item_names_the_shard() -> None:
    with pytest.raises(InvalidShardItems, match="shard 5: its items chunk x does not exist"):
        item_of_chunk(None, 5, "x")
    with pytest.raises(InvalidShardItems, match="shard 5: the items chunk x has no item for it"):
        item_of_chunk({"first": 0, "items": [1, 2]}, 5, "x")


def test_chunks_go_with_the_shards_folder_and_are_no_shard_s_done_marker() -> None:
    """The clean-up after success deletes ``shards_folder`` (then the empty container): the staged items go
    with it; the ledger's listing of done markers there never takes a chunk for a shard."""
    names = [chunk_name("p", 0), staged_index_name("p"), done_name("p", 3)]
    assert all(name.startswith(shards_folder("p")) for name in names)
    assert list(done_shard_ids(names, "p")) == [3]
