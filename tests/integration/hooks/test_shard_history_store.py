"""ShardHistoryStore against Azurite: a night merged and read back, retries of a night, racing writers,
content it did not write ignored and replaced, clearing."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

import pytest

from airflow_kueue_provider.hooks.blob_store import BlobStoreHook, RetryPolicy
from airflow_kueue_provider.hooks.shard_history_store import ShardHistoryStore, history_blob
from airflow_kueue_provider.kueue.index_set import IndexSet

FAST = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.2, request_timeout=5.0)


@pytest.fixture
def hook(devcluster_env: dict[str, str]) -> Iterator[BlobStoreHook]:
    cs = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    with BlobStoreHook.from_connection_string(cs, f"t-{uuid.uuid4().hex[:16]}", retry=FAST) as made:
        made.get_conn().create_container()
        yield made
        made.get_conn().delete_container()


def test_a_night_is_merged_and_read_back_next_to_the_ledgers(hook: BlobStoreHook) -> None:
    store = ShardHistoryStore(hook, "nightly.prices", "price/all", 3)
    assert store.read() is None
    store.merge_night("scheduled__2026-12-01", 4, {0: 10.0, 1: 2.0, 3: 4.0}, IndexSet.parse("3"))
    assert store.name == ".shard-history/nightly%2Eprices/price%2Fall/3.json"
    assert [name for name, _ in hook.list_names("")] == [store.name]
    history = store.read()
    assert history is not None and history.seconds == (10.0, 2.0, None, 4.0)
    learned = history.learned()
    assert learned is not None and learned.nights == ("scheduled__2026-12-01",) and learned.fits(4)
    again = ShardHistoryStore(hook, "nightly.prices", "price/all", 3)
    again.merge_night("scheduled__2026-12-02", 4, {0: 20.0})
    assert again.read() is not None and again.read().seconds[0] == 13.0  # type: ignore[union-attr]
    assert ShardHistoryStore(hook, "nightly.prices", "price/all").read() is None, "map index -1 is another"


def test_a_retried_night_writes_nothing_new(hook: BlobStoreHook) -> None:
    store = ShardHistoryStore(hook, "d", "t")
    store.merge_night("run-1", 2, {0: 5.0})
    _, etag = hook.read_json(store.name)
    store.merge_night("run-1", 2, {0: 5.0})
    assert hook.read_json(store.name)[1] == etag


def test_racing_writers_lose_no_shard(hook: BlobStoreHook) -> None:
    """Eight mapped writers of one night (say a night recorded by several attempts at once): every shard
    figure lands, through ETag conflicts and re-merges."""
    store_of = [ShardHistoryStore(hook, "d", "t") for _ in range(8)]
    threads = [
        threading.Thread(target=s.merge_night, args=("run-1", 8, {i: float(i + 1)}))
        for i, s in enumerate(store_of)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    history = store_of[0].read()
    assert history is not None and history.seconds == tuple(float(i + 1) for i in range(8))


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", json.dumps({"version": 99, "lengths": "x"}).encode()]
)
def test_content_it_did_not_write_is_ignored_and_replaced(hook: BlobStoreHook, body: bytes) -> None:
    name = history_blob("d", "t")
    hook.get_conn().get_blob_client(name).upload_blob(body)
    store = ShardHistoryStore(hook, "d", "t")
    assert store.read() is None
    store.merge_night("run-1", 2, {1: 3.0})
    history = store.read()
    assert history is not None and history.seconds == (None, 3.0)


def test_clearing_forgets_the_history(hook: BlobStoreHook) -> None:
    store = ShardHistoryStore(hook, "d", "t")
    store.merge_night("run-1", 2, {1: 3.0})
    assert store.clear() and store.read() is None and not store.clear()


def test_a_nights_forecast_error_joins_its_lengths_and_a_writer_between_loses_nothing(
    hook: BlobStoreHook,
) -> None:
    store = ShardHistoryStore(hook, "d", "t")
    store.merge_night("run-1", 2, {0: 5.0, 1: 6.0})
    _, etag = hook.read_json(store.name)
    merged = store.merge_wait_error("run-1", 2, 42.0)
    assert hook.read_json(store.name)[1] != etag
    read = store.read()
    assert read == merged and read is not None and read.wait_errors == (42.0,)
    assert read.seconds == (5.0, 6.0) and read.learned() is not None
    assert read.learned().wait_bias_seconds == 42.0  # type: ignore[union-attr]
    _, etag = hook.read_json(store.name)
    store.merge_wait_error("run-1", 2, 42.0)  # the same figure again: nothing new to write
    assert hook.read_json(store.name)[1] == etag
