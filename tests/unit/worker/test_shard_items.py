"""``shard.item``: shard ``i`` reads item ``i`` of ``shard_items=``, inline or staged, in a pod of one shard
or a pack, and on a retry that runs only some shards (keyed by shard id, never by pod index)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_kueue_provider.kueue.checkpoints.shard_item_chunks import ITEMS_PER_CHUNK, chunks
from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack
from airflow_kueue_provider.worker.shard import NoShardItem
from airflow_kueue_provider.worker.shard_items import ShardItems

from .test_mapping import ENV
from .test_shard import PREFIX, MemoryStore

ITEMS = [f"region-{i}" for i in range(10)]
INLINE = {"AIRFLOW_KUEUE_SHARD_ITEMS": json.dumps(ITEMS)}


def _items_of_pack(environ: dict[str, str], store: MemoryStore) -> dict[int, Any]:
    env = ShardEnv.from_environ(environ)
    seen: dict[int, Any] = {}
    for shard in ShardPack(Shard, env, handle_sigterm=False, stores=(store, store)).shards():
        with shard:
            seen[shard.shard_id] = shard.item
            shard.mark_done({"item": shard.item})
    return seen


def _one_shard(environ: dict[str, str], store: MemoryStore) -> Shard:
    env = ShardEnv.from_environ(environ)
    return Shard(env.shard_id, env.index, store, prefix=env.prefix, items=ShardItems.for_env(env))


def test_an_unpacked_pod_reads_its_shard_s_item_not_its_index_s() -> None:
    # index 1 of a retry that runs shards 3 and 7: shard 7, item 7
    shard = _one_shard({**ENV, **INLINE}, MemoryStore())
    assert (shard.index, shard.shard_id, shard.item) == (1, 7, "region-7")


def test_without_shards_env_shard_id_is_the_index() -> None:
    environ = {k: v for k, v in ENV.items() if k != "AIRFLOW_KUEUE_SHARDS"}
    assert _one_shard({**environ, **INLINE}, MemoryStore()).item == "region-1"


def test_each_shard_of_a_pack_gets_its_own_item() -> None:
    environ = {**ENV, **INLINE, "AIRFLOW_KUEUE_SHARDS": "0-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "4"}
    assert _items_of_pack(environ, MemoryStore()) == {s: f"region-{s}" for s in (4, 5, 6, 7)}


def test_a_retry_of_some_shards_packed_keeps_each_item_with_its_shard() -> None:
    """The retry runs shards 2, 5, 8 and 9 two per pod: index 1 runs 8 and 9, and reads their items."""
    environ = {**ENV, **INLINE, "AIRFLOW_KUEUE_SHARDS": "2,5,8-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "2"}
    assert _items_of_pack(environ, MemoryStore()) == {8: "region-8", 9: "region-9"}


def test_staged_items_are_read_one_chunk_for_the_whole_pack() -> None:
    items = [{"file": f"part-{i:05d}.csv"} for i in range(2 * ITEMS_PER_CHUNK + 5)]
    store = MemoryStore()
    for name, document in chunks(PREFIX, items):
        store.write_json(name, document)
    reads: list[str] = []
    read = store.read_json

    def counted(name: str) -> tuple[dict[str, Any] | None, str | None]:
        reads.append(name)
        return read(name)

    store.read_json = counted  # type: ignore[method-assign]
    last = 2 * ITEMS_PER_CHUNK + 4
    environ = {
        **ENV,
        "AIRFLOW_KUEUE_SHARD_ITEMS_BLOB": "blob://inputs/items.jsonl",
        "AIRFLOW_KUEUE_SHARDS": f"{last - 3}-{last}",
        "AIRFLOW_KUEUE_SHARDS_PER_POD": "2",
    }
    assert _items_of_pack(environ, store) == {s: items[s] for s in (last - 1, last)}
    assert [r for r in reads if "/items/" in r] == [f"{PREFIX}/shards/items/2.json"]


def test_a_shard_past_the_staged_items_fails_naming_its_shard() -> None:
    store = MemoryStore()
    for name, document in chunks(PREFIX, ["a", "b"]):
        store.write_json(name, document)
    environ = {**ENV, "AIRFLOW_KUEUE_SHARD_ITEMS_BLOB": "blob://x.jsonl"}  # shard 7
    with pytest.raises(NoShardItem, match=r"shard 7: the items chunk .* has no item for it .*blob://x.jsonl"):
        _ = _one_shard(environ, store).item


def test_a_shard_past_the_inline_items_fails_naming_its_shard() -> None:
    environ = {**ENV, "AIRFLOW_KUEUE_SHARD_ITEMS": '["a", "b"]'}
    with pytest.raises(NoShardItem, match=r"shard 7: AIRFLOW_KUEUE_SHARD_ITEMS holds 2 items"):
        _ = _one_shard(environ, MemoryStore()).item


def test_a_task_without_items_says_so() -> None:
    with pytest.raises(NoShardItem, match="no shard_items="):
        _ = _one_shard(dict(ENV), MemoryStore()).item
