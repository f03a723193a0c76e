"""``done.json`` says how long the shard ran (``run_seconds``) and whether it resumed (the shard history's
input), for a single shard and for each shard of a pack; records without them still read as done."""

from __future__ import annotations

import time

import pytest

from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack

from .test_mapping import ENV
from .test_shard import PREFIX, MemoryStore

PACKED = {**ENV, "AIRFLOW_KUEUE_SHARDS": "0-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "4"}  # index 1: 4-7


def _done(store: MemoryStore, shard_id: int, prefix: str = PREFIX) -> dict[str, object]:
    doc, _ = store.read_json(f"{prefix}/shards/{shard_id}/done.json")
    assert doc is not None
    return doc


def test_a_shard_records_its_run_seconds_and_no_resumed_flag_on_a_fresh_start() -> None:
    store = MemoryStore()
    shard = Shard(3, 3, store, prefix=PREFIX)
    assert shard.load() is None
    time.sleep(0.2)
    shard.mark_done({"items": 1})
    doc = _done(store, 3)
    assert 0.2 <= float(doc["run_seconds"]) < 5, doc  # type: ignore[arg-type]
    assert "resumed" not in doc


def test_a_resumed_shard_says_so_and_its_seconds_are_only_this_process_tail() -> None:
    store = MemoryStore()
    first = Shard(3, 3, store, prefix=PREFIX)
    first.save({"next": 5}, progress=5)  # then evicted: no mark_done
    time.sleep(0.3)  # the pod is gone a while
    again = Shard(3, 3, store, prefix=PREFIX)
    assert again.load() == {"next": 5}
    again.mark_done({"items": 9})
    doc = _done(store, 3)
    assert doc["resumed"] is True and float(doc["run_seconds"]) < 0.3, doc  # type: ignore[arg-type]


def test_each_shard_of_a_pack_records_its_own_seconds() -> None:
    store = MemoryStore()
    pack = ShardPack(Shard, ShardEnv.from_environ(PACKED), handle_sigterm=False, stores=(store, store))
    pause = {4: 0.05, 5: 0.4, 6: 0.05, 7: 0.05}
    for shard in pack.shards():
        with shard:
            time.sleep(pause[shard.shard_id])
            shard.mark_done({"items": 1})
    seconds = {sid: float(_done(store, sid)["run_seconds"]) for sid in pause}  # type: ignore[arg-type]
    assert seconds[5] >= 0.4 and all(seconds[s] < 0.35 for s in (4, 6, 7)), seconds


@pytest.mark.parametrize("doc", [{"format": 1, "shard_id": 3, "index": 3, "output": {}}])
def test_a_done_record_without_run_seconds_still_counts_as_done(doc: dict[str, object]) -> None:
    store = MemoryStore()
    store.write_json(f"{PREFIX}/shards/3/done.json", doc)
    assert Shard(3, 3, store, prefix=PREFIX).is_done()
