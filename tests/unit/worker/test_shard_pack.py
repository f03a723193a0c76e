"""Several shards in one pod (``Shard.each_from_env`` / ``ShardPack``), against an in-memory store."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack, ShardsFailed
from airflow_kueue_provider.worker.shard import EXIT_SIGTERM

from .test_mapping import ENV
from .test_shard import PREFIX, MemoryStore, _sigterm_and_wait

PACKED = {**ENV, "AIRFLOW_KUEUE_SHARDS": "0-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "4"}  # index 1: 4-7


def _pack(store: MemoryStore, handle_sigterm: bool = False) -> ShardPack:
    env = ShardEnv.from_environ(PACKED)
    return ShardPack(Shard, env, handle_sigterm=handle_sigterm, stores=(store, store))


def _run(pack: ShardPack, fail: set[int] = frozenset(), skip_done: set[int] = frozenset()) -> list[int]:
    ran = []
    for shard in pack.shards():
        with shard:
            state = shard.load() or {"next": 0}
            ran.append(shard.shard_id)
            if shard.shard_id in fail:
                raise RuntimeError(f"bad input in shard {shard.shard_id}")
            shard.save({"next": state["next"] + 1}, progress=1)
            if shard.shard_id not in skip_done:
                shard.mark_done({"items": 1})
    return ran


def test_a_pack_runs_each_of_its_shards_with_its_own_checkpoints_and_done_marker() -> None:
    store = MemoryStore()
    assert _run(_pack(store)) == [4, 5, 6, 7]
    for sid in (4, 5, 6, 7):
        assert f"{PREFIX}/shards/{sid}/done.json" in store.blobs
        assert f"{PREFIX}/shards/{sid}/checkpoint-00000001.json" in store.blobs
    assert f"{PREFIX}/shards/3/done.json" not in store.blobs


def test_a_failing_shard_does_not_stop_the_others_and_the_pod_then_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    pack = _pack(store)
    with caplog.at_level(logging.ERROR), pytest.raises(ShardsFailed) as failed:
        _run(pack, fail={5})
    assert failed.value.code == 1 and set(failed.value.failed) == {5}
    assert "shard 5: RuntimeError: bad input in shard 5" in str(failed.value)
    assert pack.ran == [4, 5, 6, 7]
    assert "shard 5 (index 1) failed; going on" in caplog.text
    # The retried pod of the index runs only the failed shard, which resumes from no checkpoint of its own.
    again = _pack(store)
    assert _run(again) == [5] and again.done_before == [4, 6, 7]


def test_a_block_without_mark_done_counts_as_failed() -> None:
    store = MemoryStore()
    with pytest.raises(ShardsFailed, match="shard 6: ended without mark_done"):
        _run(_pack(store), skip_done={6})


def test_a_sigterm_ends_the_pack_with_143_after_the_shard_in_progress_flushed() -> None:
    store = MemoryStore()
    before = signal.getsignal(signal.SIGTERM)
    seen = []
    with pytest.raises(SystemExit) as stopped:
        for shard in _pack(store, handle_sigterm=True).shards():
            shard.sigterm._hard_exit = lambda code: None  # the backstop must not end pytest
            with shard:
                seen.append(shard.shard_id)
                shard.set_latest({"next": 3}, progress=3)
                if shard.shard_id == 5:
                    _sigterm_and_wait()
                shard.mark_done({"items": 3})
    assert stopped.value.code == EXIT_SIGTERM
    assert seen == [4, 5], "no shard starts after the SIGTERM"
    assert f"{PREFIX}/shards/4/done.json" in store.blobs
    assert f"{PREFIX}/shards/5/done.json" not in store.blobs
    flushed = [d for n, (d, _) in store.blobs.items() if n.startswith(f"{PREFIX}/shards/5/checkpoint-")]
    assert [(d["state"], d["reason"], d["progress"]) for d in flushed] == [({"next": 3}, "sigterm", 3)]
    assert signal.getsignal(signal.SIGTERM) == before, "the pack puts the previous handler back"


def test_a_sigterm_between_shards_stops_before_the_next_one() -> None:
    store = MemoryStore()
    pack = _pack(store, handle_sigterm=True)
    seen = []
    with pytest.raises(SystemExit) as stopped:
        for shard in pack.shards():
            with shard:
                seen.append(shard.shard_id)
                shard.mark_done({"items": 1})
            os.kill(os.getpid(), signal.SIGTERM)  # the shard's own handler is gone: the pack's notes it
    assert stopped.value.code == EXIT_SIGTERM and seen == [4]


def test_the_single_shard_form_refuses_a_packed_pod() -> None:
    with pytest.raises(ValueError, match=r"runs shards \[4, 5, 6, 7\].*Shard.each_from_env"):
        Shard.from_env(PACKED, handle_sigterm=False)


def test_each_from_env_also_serves_an_unpacked_pod() -> None:
    store = MemoryStore()
    pack = ShardPack(Shard, ShardEnv.from_environ(ENV), handle_sigterm=False, stores=(store, store))
    assert _run(pack) == [7]
