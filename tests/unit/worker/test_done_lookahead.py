"""A pack reads each shard's done marker while the shard before it runs (``DoneLookahead``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from airflow_kueue_provider.storage.blob_errors import BlobUnavailable
from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack
from airflow_kueue_provider.worker.done_lookahead import THREAD_NAME, DoneLookahead

from .test_shard import PREFIX, MemoryStore
from .test_shard_pack import PACKED  # index 1 runs shards 4-7


def done(shard_id: int) -> str:
    return f"{PREFIX}/shards/{shard_id}/done.json"


class WatchedStore(MemoryStore):
    """Notes each done-marker read (and its thread); a done marker's write waits, boundedly, for the next
    shard's read, so a read that is not made ahead shows as a missing one."""

    def __init__(self, unavailable: int | None = None) -> None:
        super().__init__()
        self.reads: list[tuple[int, str]] = []
        self.read_seen = {sid: threading.Event() for sid in range(10)}
        self.ahead_of_write: dict[int, bool] = {}
        self.unavailable = unavailable

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        if name.endswith("/done.json"):
            sid = int(name.split("/")[-2])
            self.reads.append((sid, threading.current_thread().name))
            self.read_seen[sid].set()
            if sid == self.unavailable:
                raise BlobUnavailable("down")
        return super().read_json(name)

    def write_json(self, name: str, data: Mapping[str, Any], **kw: Any) -> str:
        if name.endswith("/done.json"):
            sid = int(name.split("/")[-2])
            self.ahead_of_write[sid] = sid == 7 or self.read_seen[sid + 1].wait(5)
        return super().write_json(name, data, **kw)


def run(pack: ShardPack[Shard]) -> list[int]:
    ran = []
    for shard in pack.shards():
        with shard:
            ran.append(shard.shard_id)
            shard.mark_done({"items": 1})
    return ran


def test_the_next_shards_done_marker_is_read_while_this_one_runs() -> None:
    store = WatchedStore()
    store.blobs[done(6)] = ({"finished_at": "earlier"}, '"0"')
    pack = ShardPack(Shard, ShardEnv.from_environ(PACKED), handle_sigterm=False, stores=(store, store))
    assert run(pack) == [4, 5, 7] and pack.done_before == [6]
    assert store.ahead_of_write == {4: True, 5: True, 7: True}, "each read out before the shard before ended"
    assert [sid for sid, _ in store.reads] == [4, 5, 6, 7], "each marker read once"
    assert {thread for _, thread in store.reads} == {THREAD_NAME}, "off the shards' thread"


def test_a_read_that_fails_fails_at_its_shard_as_the_read_in_line_did() -> None:
    store = WatchedStore(unavailable=6)
    pack = ShardPack(Shard, ShardEnv.from_environ(PACKED), handle_sigterm=False, stores=(store, store))
    ran: list[int] = []
    with pytest.raises(BlobUnavailable):
        for shard in pack.shards():
            with shard:
                ran.append(shard.shard_id)
                shard.mark_done({"items": 1})
    assert ran == [4, 5]


def test_a_shard_asked_out_of_order_is_read_then() -> None:
    store = MemoryStore()
    store.blobs[done(5)] = ({}, '"0"')
    lookahead = DoneLookahead(store, PREFIX, [4, 5, 6])
    try:
        assert lookahead.done(5) is True and lookahead.done(4) is False and lookahead.done(6) is False
    finally:
        lookahead.close()
