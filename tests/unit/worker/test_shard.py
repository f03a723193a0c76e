"""Shard checkpoints on an in-memory store: numbering, pruning, resume, conflicts, the SIGTERM flush."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import pytest

from airflow_kueue_provider.hooks.blob_store import BlobPreconditionFailed, BlobUnavailable
from airflow_kueue_provider.worker import EXIT_SIGTERM, MAX_CHECKPOINT_BYTES, Shard
from airflow_kueue_provider.worker.shard import FLUSH_MARGIN_SECONDS

PREFIX = "dag/run/task"


class MemoryStore:
    """The JsonStore protocol over a dict; ``fail``/``hang`` simulate an unavailable or stuck service."""

    def __init__(self) -> None:
        self.blobs: dict[str, tuple[dict[str, Any], str]] = {}
        self.fail = False
        self.hang = False
        self.release = threading.Event()
        self.writes: list[tuple[str, float | None]] = []
        self._n = 0

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        return self.blobs.get(name, (None, None))

    def write_json(
        self,
        name: str,
        data: Mapping[str, Any],
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        timeout: float | None = None,
    ) -> str:
        if self.hang:
            self.release.wait(60)
        if self.fail:
            raise BlobUnavailable("down")
        if if_none_match and name in self.blobs:
            raise BlobPreconditionFailed(name)
        self._n += 1
        self.blobs[name] = (dict(data), f'"{self._n}"')
        self.writes.append((name, timeout))
        return f'"{self._n}"'

    def list_names(self, prefix: str) -> list[tuple[str, datetime]]:
        return [(n, datetime.now(timezone.utc)) for n in sorted(self.blobs) if n.startswith(prefix)]

    def delete(self, name: str) -> bool:
        return self.blobs.pop(name, None) is not None

    def checkpoints(self, shard_id: int = 7) -> dict[int, dict[str, Any]]:
        folder = f"{PREFIX}/shards/{shard_id}/checkpoint-"
        return {int(n[len(folder) : -5]): d for n, (d, _) in self.blobs.items() if n.startswith(folder)}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def shard(store: MemoryStore) -> Iterator[Shard]:
    with Shard(7, 1, store, prefix=PREFIX, grace_seconds=5.0, keep=3) as s:
        yield s


def test_saves_are_numbered_and_only_the_newest_kept(shard: Shard, store: MemoryStore) -> None:
    assert [shard.save({"next": n}) for n in range(1, 6)] == [1, 2, 3, 4, 5]
    assert sorted(store.checkpoints()) == [3, 4, 5]
    doc = store.checkpoints()[5]
    assert (doc["state"], doc["reason"], doc["shard_id"], doc["index"], doc["seq"]) == (
        {"next": 5},
        "periodic",
        7,
        1,
        5,
    )


def test_load_resumes_from_the_newest_and_continues_numbering(store: MemoryStore) -> None:
    with Shard(7, 1, store, prefix=PREFIX) as first:
        assert first.load() is None
        for n in range(4):
            first.save({"next": n})
    with Shard(7, 1, store, prefix=PREFIX, keep=2) as second:
        assert second.load() == {"next": 3} and second.resumed_seq == 4 and second.latest == {"next": 3}
        assert sorted(store.checkpoints()) == [3, 4]  # pruned to the new keep
        assert second.save({"next": 4}) == 5


def test_a_taken_number_is_skipped_not_overwritten(shard: Shard, store: MemoryStore) -> None:
    store.write_json(f"{PREFIX}/shards/7/checkpoint-00000001.json", {"state": {"other": "pod"}})
    assert shard.save({"next": 1}) == 2
    assert store.checkpoints()[1]["state"] == {"other": "pod"}


def test_unavailable_storage_defers_the_save(shard: Shard, store: MemoryStore) -> None:
    store.fail = True
    assert shard.save({"next": 1}) is None
    assert shard.latest == {"next": 1}
    store.fail = False
    assert shard.save({"next": 2}) is not None


def test_a_big_state_is_refused(shard: Shard) -> None:
    with pytest.raises(ValueError, match="keep the state small"):
        shard.save({"blob": "x" * MAX_CHECKPOINT_BYTES})


def test_done_marker(shard: Shard, store: MemoryStore) -> None:
    assert not shard.is_done()
    shard.mark_done({"items": 3})
    assert shard.is_done()
    assert store.read_json(f"{PREFIX}/shards/7/done.json")[0]["output"] == {"items": 3}  # type: ignore[index]


def test_flush_is_bounded_even_when_the_upload_hangs(shard: Shard, store: MemoryStore) -> None:
    shard.latest = {"next": 9}
    store.hang = True
    started = time.monotonic()
    assert shard.flush(0.3) is None
    assert time.monotonic() - started < 1.0
    store.release.set()


def test_flush_writes_latest_with_the_remaining_budget(shard: Shard, store: MemoryStore) -> None:
    assert shard.flush(1.0) is None  # nothing to flush yet
    shard.latest = {"next": 9}
    assert shard.flush(1.0) == 1
    assert store.checkpoints()[1]["reason"] == "sigterm"
    assert 0 < store.writes[-1][1] <= 1.0  # type: ignore[operator]


def _sigterm_and_wait(shard: Shard) -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # the handler runs in this (main) thread between bytecodes
        if shard._sigterm_at is not None:
            return
        time.sleep(0.001)
    raise AssertionError("SIGTERM was not handled")


def test_sigterm_flushes_latest_and_exits_143(shard: Shard, store: MemoryStore) -> None:
    shard.handle_sigterm()
    shard.save({"next": 2})
    shard.latest = {"next": 3}
    with pytest.raises(SystemExit) as info:
        _sigterm_and_wait(shard)
    assert info.value.code == EXIT_SIGTERM
    newest = store.checkpoints()[max(store.checkpoints())]
    assert (newest["state"], newest["reason"]) == ({"next": 3}, "sigterm")
    assert store.writes[-1][1] <= shard.grace_seconds - FLUSH_MARGIN_SECONDS  # type: ignore[operator]


def test_sigterm_waits_for_the_critical_block(shard: Shard, store: MemoryStore) -> None:
    shard.handle_sigterm()
    steps = []
    with pytest.raises(SystemExit), shard.critical():
        _sigterm_and_wait(shard)
        steps.append("recorded")
        shard.latest = {"next": 4}
    assert steps == ["recorded"]
    assert store.checkpoints()[1]["state"] == {"next": 4}


def test_close_restores_the_previous_handler(store: MemoryStore) -> None:
    before = signal.getsignal(signal.SIGTERM)
    shard = Shard(7, 1, store, prefix=PREFIX)
    shard.handle_sigterm()
    assert signal.getsignal(signal.SIGTERM) != before
    shard.close()
    assert signal.getsignal(signal.SIGTERM) == before


def test_worker_imports_without_airflow() -> None:
    """The shard container has the azure SDK but no Airflow."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'airflow' or name.startswith('airflow.'):\n"
        "            raise ImportError('no airflow here')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import airflow_kueue_provider.worker, airflow_kueue_provider.worker.sample_shard\n"
        "from airflow_kueue_provider.hooks.blob_store import BlobStoreHook\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'airflow']\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
