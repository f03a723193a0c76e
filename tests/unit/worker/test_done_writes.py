"""A pack writes each shard's done marker while the next shard runs (``DoneWrites``), and waits for the
writes before the pod ends: a marker not written makes its shard count as failed, never finished."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from airflow_kueue_provider.storage.blob_errors import BlobUnavailable
from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack, ShardsFailed
from airflow_kueue_provider.worker.done_writes import THREAD_NAME, DoneWrites

from .test_shard import PREFIX, MemoryStore
from .test_shard_pack import PACKED  # index 1 runs shards 4-7


def done(shard_id: int) -> str:
    return f"{PREFIX}/shards/{shard_id}/done.json"


class SlowMarkers(MemoryStore):
    """A done marker's write waits until the next shard has started (boundedly), or fails for ``down``."""

    def __init__(self, down: int | None = None) -> None:
        super().__init__()
        self.started = {sid: threading.Event() for sid in range(10)}
        self.written_after_next_started: dict[int, bool] = {}
        self.writers: set[str] = set()
        self.down = down

    def write_json(self, name: str, data: Mapping[str, Any], **kw: Any) -> str:
        if name.endswith("/done.json"):
            sid = int(name.split("/")[-2])
            self.writers.add(threading.current_thread().name)
            self.written_after_next_started[sid] = sid == 7 or self.started[sid + 1].wait(5)
            if sid == self.down:
                raise BlobUnavailable("down")
        return super().write_json(name, data, **kw)


def run(store: SlowMarkers) -> tuple[ShardPack[Shard], list[int]]:
    pack = ShardPack(Shard, ShardEnv.from_environ(PACKED), handle_sigterm=False, stores=(store, store))
    ran = []
    for shard in pack.shards():
        with shard:
            store.started[shard.shard_id].set()
            ran.append(shard.shard_id)
            shard.mark_done({"items": 1})
    return pack, ran


def test_the_next_shard_starts_before_the_marker_is_written_and_the_pod_waits_for_all() -> None:
    store = SlowMarkers()
    _, ran = run(store)
    assert ran == [4, 5, 6, 7]
    assert store.written_after_next_started == dict.fromkeys((4, 5, 6, 7), True)
    assert all(done(sid) in store.blobs for sid in ran), "every marker written before the loop ended"
    assert store.writers == {THREAD_NAME}
    assert store.blobs[done(5)][0]["run_seconds"] >= 0, "the record is the one mark_done made"


def test_a_marker_that_cannot_be_written_fails_its_shard_and_the_pod() -> None:
    store = SlowMarkers(down=5)
    with pytest.raises(ShardsFailed, match="shard 5: its done marker was not written: BlobUnavailable"):
        run(store)
    assert done(5) not in store.blobs and all(done(sid) in store.blobs for sid in (4, 6, 7))


def test_writes_go_in_order_and_a_stuck_one_is_waited_for_only_as_long_as_told() -> None:
    writes, order, release = DoneWrites(), [], threading.Event()
    writes.submit(1, lambda: order.append(1))
    writes.submit(2, lambda: (release.wait(10), order.append(2)))
    writes.submit(3, lambda: order.append(3))
    started = time.monotonic()
    assert writes.drain(0.2) == {
        2: "its done marker was still being written when the pod stopped",
        3: "its done marker was still being written when the pod stopped",
    }
    assert time.monotonic() - started < 5 and order == [1]
    release.set()
    assert DoneWrites().drain() == {}, "nothing submitted: nothing to wait for"
