"""``shard_items=`` parsed and checked (pure): the shapes, the limits (named in the error), JSON only, the
completions rule; errors name an item's index, never its value."""

from __future__ import annotations

import json
import math

import pytest

from airflow_kueue_provider.kueue.spec.shard_items import (
    MAX_INLINE_ITEMS_BYTES,
    MAX_ITEMS,
    InlineItems,
    InvalidShardItems,
    ShardItemsBlob,
    completions_for,
    first_secret_item,
    parse_shard_items,
)


def test_a_list_is_kept_with_its_compact_json() -> None:
    parsed = parse_shard_items(["a", {"x": 1}, [2, None], True])
    assert isinstance(parsed, InlineItems) and len(parsed) == 4
    assert parsed.encoded == '["a",{"x":1},[2,null],true]'


def test_a_rendered_json_string_is_a_list() -> None:
    parsed = parse_shard_items(' ["eu", "us"] ')
    assert isinstance(parsed, InlineItems) and parsed.items == ("eu", "us")


@pytest.mark.parametrize("value", ["blob://inputs/items.jsonl", ShardItemsBlob("inputs/items.jsonl")])
def test_a_blob_reference_in_either_shape(value: object) -> None:
    assert parse_shard_items(value) == ShardItemsBlob("inputs/items.jsonl")
    assert str(ShardItemsBlob("inputs/items.jsonl")) == "blob://inputs/items.jsonl"


@pytest.mark.parametrize("path", ["", "/abs.jsonl", "a/../b.jsonl", "a//b.jsonl"])
def test_a_bad_blob_path_is_refused(path: str) -> None:
    with pytest.raises(InvalidShardItems, match="ShardItemsBlob"):
        ShardItemsBlob(path)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([], "empty"),
        ("not json", "a string must hold a JSON list"),
        ('{"a": 1}', "holds a JSON dict, not a list"),
        (42, "expected a list of JSON values"),
        (["ok", object()], "item 1 is not a JSON value"),
        (["ok", 1, math.nan], "item 2 is not a JSON value"),
    ],
)
def test_bad_items_are_refused_saying_what(value: object, says: str) -> None:
    with pytest.raises(InvalidShardItems, match=says):
        parse_shard_items(value)


def test_too_many_items_are_refused_naming_the_limit() -> None:
    with pytest.raises(InvalidShardItems, match=f"more than {MAX_ITEMS}"):
        parse_shard_items([0] * (MAX_ITEMS + 1))


def test_inline_items_over_64_kib_point_at_the_blob_form() -> None:
    big = ["x" * 1000] * (MAX_INLINE_ITEMS_BYTES // 1000 + 1)
    with pytest.raises(InvalidShardItems) as refused:
        parse_shard_items(big)
    assert f"more than the {MAX_INLINE_ITEMS_BYTES}" in str(refused.value)
    assert "ShardItemsBlob(" in str(refused.value)
    fits = ["x" * 1000] * (MAX_INLINE_ITEMS_BYTES // 1010)
    assert len(json.dumps(fits, separators=(",", ":"))) <= MAX_INLINE_ITEMS_BYTES
    assert isinstance(parse_shard_items(fits), InlineItems)


def test_the_first_item_holding_a_secret_is_named_by_index() -> None:
    assert first_secret_item(["a", "b", "s3cret", "s3cret"], lambda item: item == "s3cret") == 2
    assert first_secret_item(["a"], lambda item: False) is None


def test_completions_are_derived_or_must_match() -> None:
    assert completions_for(1, 12, given=False) == 12
    assert completions_for(12, 12, given=True) == 12
    with pytest.raises(InvalidShardItems, match="completions=10 but shard_items holds 12 items"):
        completions_for(10, 12, given=True)
