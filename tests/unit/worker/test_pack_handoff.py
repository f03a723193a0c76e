"""A stopped pod's shards taken over by the Job's other pods (``pack_handoff`` through ``ShardPack``), on an
in-memory store: the release record, claims and their leases, the stopped index's next pod waiting."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import claim_name, released_name
from airflow_kueue_provider.storage.blob_errors import BlobUnavailable
from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack, pack_handoff
from airflow_kueue_provider.worker.pack_handoff import BlobHandOff, NoHandOff
from airflow_kueue_provider.worker.shard import EXIT_SIGTERM

from .test_shard import PREFIX, MemoryStore, _sigterm_and_wait
from .test_shard_pack import PACKED  # shards 0-9, 4 a pod: index 0 runs 0-3, index 1 runs 4-7, index 2 8-9


def _env(index: int) -> ShardEnv:
    return ShardEnv.from_environ({**PACKED, "JOB_COMPLETION_INDEX": str(index)})


class QuickPack(ShardPack[Shard]):
    """A pack whose hand-off polls every 10 ms (and, with ``holder``, claims under that name)."""

    def __init__(self, store: MemoryStore, index: int, *, handle_sigterm: bool = False, **kw: object) -> None:
        super().__init__(Shard, _env(index), handle_sigterm=handle_sigterm, stores=(store, store))
        self.kw = kw

    def _hand_off_for(self, store):  # type: ignore[no-untyped-def]
        env = self.env
        return BlobHandOff(
            store, env.prefix, env.layout, env.index, poll_seconds=0.01, job_shards=env.job_shards, **self.kw
        )


def _run(pack: ShardPack[Shard], stop_at: int | None = None) -> list[int]:
    """Run the pack; each shard counts from its checkpoint to 3, and SIGTERMs itself at shard ``stop_at``."""
    seen = []
    for shard in pack.shards():
        shard.sigterm._hard_exit = lambda code: None  # the backstop must not end pytest
        with shard:
            state = shard.load() or {"next": 0}
            seen.append(shard.shard_id)
            shard.set_latest({"next": state["next"] + 1}, progress=state["next"] + 1)
            if shard.shard_id == stop_at:
                _sigterm_and_wait()
            shard.mark_done({"from": state["next"]})
    return seen


def _stopped_at_5(store: MemoryStore) -> None:
    with pytest.raises(SystemExit) as stopped:
        _run(QuickPack(store, 1, handle_sigterm=True), stop_at=5)
    assert stopped.value.code == EXIT_SIGTERM


def _done(store: MemoryStore) -> set[int]:
    return {int(n.split("/")[-2]) for n in store.blobs if n.endswith("/done.json")}


def test_a_stopped_pod_releases_its_unfinished_shards_and_a_running_pod_takes_them_over() -> None:
    store = MemoryStore()
    _stopped_at_5(store)
    record = store.blobs[released_name(PREFIX, _env(1).layout, 1)][0]
    assert record["shards"] == [5, 6, 7] and record["index"] == 1
    peer = QuickPack(store, 0)
    assert _run(peer) == [0, 1, 2, 3, 5, 6, 7]
    assert peer.taken_over == [5, 6, 7] and not peer.failed
    assert store.blobs[f"{PREFIX}/shards/5/done.json"][0]["output"] == {"from": 1}, "5 resumed from its flush"
    # The stopped index's next pod finds its pack done: it runs nothing and exits 0.
    again = QuickPack(store, 1)
    assert _run(again) == [] and again.done_before == [4, 5, 6, 7]


def test_the_stopped_indexs_next_pod_runs_what_nobody_holds_and_waits_for_what_another_pod_holds() -> None:
    store = MemoryStore()
    _stopped_at_5(store)
    other = BlobHandOff(store, PREFIX, _env(0).layout, 0, holder="peer")
    assert other.claim(6)  # a running pod of the Job took 6 over
    finish = threading.Timer(0.2, lambda: store.write_json(f"{PREFIX}/shards/6/done.json", {"by": "peer"}))
    finish.start()
    again = QuickPack(store, 1)
    started = time.monotonic()
    assert _run(again) == [5, 7], "6 is the peer's"
    assert time.monotonic() - started >= 0.15, "the pod waited for 6 before it ended"
    assert _done(store) >= {4, 5, 6, 7}
    other.close()


def test_a_claim_whose_holder_went_quiet_is_taken_once_its_lease_ran_out() -> None:
    store = MemoryStore()
    _stopped_at_5(store)
    gone = BlobHandOff(store, PREFIX, _env(0).layout, 0, holder="gone", lease_seconds=0.5)
    assert gone.claim(6)
    gone._renewing.set()  # it dies unseen: no renewal, no release
    assert not BlobHandOff(store, PREFIX, _env(2).layout, 2, holder="early").claim(6)
    time.sleep(0.6)
    again = QuickPack(store, 1)
    assert _run(again) == [5, 6, 7], "6 is run by its own index: the lease had run out"
    assert store.blobs[claim_name(PREFIX, 6)][0]["holder"] != "gone"


def test_two_pods_racing_for_a_released_shard_one_wins() -> None:
    store = MemoryStore()
    a = BlobHandOff(store, PREFIX, "x1", 0, holder="a")
    b = BlobHandOff(store, PREFIX, "x1", 2, holder="b")
    assert a.claim(9) and not b.claim(9)
    a.finished(9, done=False)  # ended undone: released for another pod
    assert b.claim(9) and not a.claim(9)


def test_a_taken_over_shard_that_fails_is_left_to_its_own_index_and_the_taker_still_succeeds() -> None:
    store = MemoryStore()
    _stopped_at_5(store)
    peer = QuickPack(store, 0)
    seen = []
    for shard in peer.shards():
        with shard:
            seen.append(shard.shard_id)
            if shard.shard_id == 6:
                raise RuntimeError("bad input")
            shard.mark_done({})
    assert seen == [0, 1, 2, 3, 5, 6, 7] and not peer.failed, "the peer exits 0: 6 is not its shard"
    assert store.blobs[claim_name(PREFIX, 6)][0]["released"] is True
    assert _run(QuickPack(store, 1)) == [6], "its own index runs 6 again"


def test_a_claim_is_renewed_while_its_shard_runs() -> None:
    store = MemoryStore()
    holder = BlobHandOff(store, PREFIX, "x1", 0, holder="a", lease_seconds=0.15)
    assert holder.claim(3)
    first = store.blobs[claim_name(PREFIX, 3)][0]["until"]
    deadline = time.monotonic() + 5
    while store.blobs[claim_name(PREFIX, 3)][0]["until"] == first and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.blobs[claim_name(PREFIX, 3)][0]["until"] > first
    holder.close()


def test_without_take_over_nothing_is_released_or_taken() -> None:
    store = MemoryStore()
    with pytest.raises(SystemExit):
        pack = ShardPack(Shard, _env(1), handle_sigterm=True, stores=(store, store), take_over=False)
        _run(pack, stop_at=5)
    assert not [n for n in store.blobs if "/released/" in n]
    _stopped_at_5(store)
    assert _run(ShardPack(Shard, _env(0), stores=(store, store), take_over=False)) == [0, 1, 2, 3]
    assert isinstance(ShardPack(Shard, _env(0), take_over=False)._hand_off_for(store), NoHandOff)


def test_a_later_try_with_other_packs_never_reads_this_layouts_records() -> None:
    store = MemoryStore()
    _stopped_at_5(store)
    later = ShardEnv.from_environ({**PACKED, "AIRFLOW_KUEUE_SHARDS": "5-9", "JOB_COMPLETION_INDEX": "0"})
    assert later.layout != _env(1).layout
    assert _run(ShardPack(Shard, later, stores=(store, store))) == [5, 6, 7, 8], "its own pack only"


def test_a_release_record_naming_shards_outside_the_job_is_not_followed_there() -> None:
    store = MemoryStore()
    store.write_json(released_name(PREFIX, _env(1).layout, 1), {"shards": [6, 42, -1, "7", True]})
    peer = QuickPack(store, 0)
    assert _run(peer) == [0, 1, 2, 3, 6] and peer.taken_over == [6], "42 is no shard of this Job (0-9)"


def test_a_claim_without_a_lease_end_counts_as_run_out() -> None:
    store = MemoryStore()
    store.write_json(claim_name(PREFIX, 4), {"holder": "odd", "until": "soon"})
    assert BlobHandOff(store, PREFIX, "x1", 0, holder="a").claim(4)


class DownStore(MemoryStore):
    """Blob failing after the store's retries, for every read, listing and write."""

    down = False

    def read_json(self, name: str):  # type: ignore[no-untyped-def]
        if self.down:
            raise BlobUnavailable("down")
        return super().read_json(name)

    def list_names(self, prefix: str):  # type: ignore[no-untyped-def]
        if self.down:
            raise BlobUnavailable("down")
        return super().list_names(prefix)


def test_blob_failing_in_the_hand_off_costs_at_most_a_shard_run_twice_never_the_pod() -> None:
    store = DownStore()
    _stopped_at_5(store)
    hand_off = BlobHandOff(store, PREFIX, _env(1).layout, 1, holder="a")
    store.down = store.fail = True
    assert hand_off.released_here([4, 5, 6, 7]) == frozenset(), "unread: the pack runs as if none"
    assert hand_off.claim(5), "unwritten: the shard runs"
    assert hand_off.take_over([0, 1, 2, 3]) is None, "nothing looked for: their own index runs them"
    assert hand_off._finish_if_done(6) is False, "unread: run it"
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    assert hand_off.wait_or_claim(6, stop) is False, "polls on until told to stop"


def _peer_once_released(store: MemoryStore, index: int = 0) -> threading.Thread:
    """A pod of the Job (``index``) that starts once pod 1's release record exists, runs its own pack and
    takes the released shards over."""
    name = released_name(PREFIX, _env(1).layout, 1)

    def peer() -> None:
        until = time.monotonic() + 10
        while name not in store.blobs and time.monotonic() < until:
            time.sleep(0.005)
        _run(QuickPack(store, index))

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    return thread


def test_a_stopped_pod_whose_rest_the_jobs_other_pods_finish_within_its_grace_exits_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per index, Kubernetes holds the stopped index's next pod back 10 s or more, and the Job cannot end
    before it: the small night's hit Jobs waited 6.6 s each after their last peer. A stopped pod that sees
    its released shards finished within its grace exits 0 (a deleted pod whose containers exit 0 is
    Succeeded), so its index is done without a next pod."""
    monkeypatch.setattr(pack_handoff, "UNCLAIMED_SECONDS", 2.0)
    store = MemoryStore()
    peer = _peer_once_released(store)
    stopped = QuickPack(store, 1, handle_sigterm=True)
    assert _run(stopped, stop_at=5) == [4, 5], "no SystemExit: the loop ended"
    peer.join(5)
    assert stopped.finished_elsewhere == [5, 6, 7] and not stopped.failed
    assert _done(store) >= {0, 1, 2, 3, 4, 5, 6, 7}
    assert store.blobs[f"{PREFIX}/shards/5/done.json"][0]["output"] == {"from": 1}, "5 resumed from its flush"


def test_a_stopped_pod_whose_rest_nobody_claims_leaves_it_to_its_next_pod_soon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pack_handoff, "UNCLAIMED_SECONDS", 0.3)
    store = MemoryStore()
    started = time.monotonic()
    _stopped_at_5(store)  # exit 143: the Job's other pods are all busy
    assert 0.3 <= time.monotonic() - started < 3.0


def test_the_wait_for_a_released_rest_ends_false_at_the_deadline_or_when_blob_cannot_say() -> None:
    store = MemoryStore()
    holder = BlobHandOff(store, PREFIX, "x1", 0, holder="peer")
    assert holder.claim(6)  # held by a live pod, never finished
    waiting = BlobHandOff(store, PREFIX, "x1", 1, holder="stopped")
    started = time.monotonic()
    assert not waiting.finished_elsewhere([6], time.monotonic() + 0.2)
    assert 0.15 <= time.monotonic() - started < 1.0
    store.write_json(f"{PREFIX}/shards/6/done.json", {"by": "peer"})
    assert waiting.finished_elsewhere([6], time.monotonic() + 0.2)
    assert NoHandOff().finished_elsewhere([6], time.monotonic() + 1) is False
    failing = BlobHandOff(FailingStore(), PREFIX, "x1", 1)
    assert not failing.finished_elsewhere([7], time.monotonic() + 1)
    holder.close()


class FailingStore(MemoryStore):
    def list_names(self, prefix: str):  # type: ignore[no-untyped-def]
        raise BlobUnavailable("Blob is down")
