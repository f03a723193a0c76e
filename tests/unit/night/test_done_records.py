"""The bed's stand-in for the worker SDK's done records: which shards a fake pod ran, and how long each."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name
from devcluster.fake_pod_lengths import RUN_REMAINING_ANNOTATION, SHARD_DURATIONS_ANNOTATION
from tests.integration.night.done_records import DoneRecords, finished_by, remaining_ms, shards_run_by


def pod(index: int, env: dict[str, str], lengths: str | None = "1,2,3,4,5,6,7,8,9,10") -> dict[str, Any]:
    annotations = {"batch.kubernetes.io/job-completion-index": str(index)}
    if lengths is not None:
        annotations[SHARD_DURATIONS_ANNOTATION] = lengths
    containers = [{"env": [{"name": k, "value": v} for k, v in env.items()]}]
    return {"metadata": {"annotations": annotations}, "spec": {"containers": containers}}


def test_a_packed_pod_ran_its_pack_in_its_order_with_each_shard_s_length() -> None:
    env = {"AIRFLOW_KUEUE_SHARDS": "0-9", "AIRFLOW_KUEUE_SHARDS_PER_POD": "4x1,3x2/9,0-8"}
    assert shards_run_by(pod(0, env)) == [(9, 10.0), (0, 1.0), (1, 2.0), (2, 3.0)]
    assert shards_run_by(pod(2, env)) == [(6, 7.0), (7, 8.0), (8, 9.0)]


def test_a_retry_s_index_is_the_i_th_unfinished_shard() -> None:
    assert shards_run_by(pod(1, {"AIRFLOW_KUEUE_SHARDS": "3,5-7"})) == [(5, 6.0)]


def test_a_pod_without_the_sdk_env_or_the_lengths_wrote_nothing() -> None:
    assert shards_run_by(pod(0, {})) is None
    assert shards_run_by(pod(0, {"AIRFLOW_KUEUE_SHARDS": "0-9"}, lengths=None)) is None


class FakeContainer:
    def __init__(self, blobs: dict[str, str]) -> None:
        self.blobs = blobs

    def upload_blob(self, name: str, data: str, overwrite: bool) -> None:
        from azure.core.exceptions import ResourceExistsError

        assert overwrite is False
        if name in self.blobs:
            raise ResourceExistsError("The specified blob already exists.")
        self.blobs[name] = data


class FakeBlobService:
    def __init__(self) -> None:
        self.blobs: dict[str, str] = {}

    def get_container_client(self, container: str) -> FakeContainer:
        assert container == "shards"
        return FakeContainer(self.blobs)


class FakeCore:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    def patch_namespaced_pod(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self.patches.append((namespace, name, body))


def sdk_pod(uid: str, index: int, lengths: str = "1,2,3,4,5,6,7,8,9,10") -> dict[str, Any]:
    env = {
        "AIRFLOW_KUEUE_SHARDS": "0-9",
        "AIRFLOW_KUEUE_SHARDS_PER_POD": "3",
        "AIRFLOW_KUEUE_CHECKPOINT_URL": "http://127.0.0.1:10000/devstoreaccount1/shards?sig=x",
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": "night/run-1/align/0/",
    }
    p = pod(index, env, lengths)
    p["metadata"].update({"uid": uid, "name": f"align-{index}-{uid}", "namespace": "genomics"})
    return p


def test_a_shard_is_finished_once_the_pod_ran_its_whole_length() -> None:
    run = [(4, 2.0), (5, 3.0), (6, 1.0)]
    assert finished_by(run, 1.9) == []
    assert finished_by(run, 5.0) == [(4, 2.0), (5, 3.0)]
    assert finished_by(run, 60) == run
    assert remaining_ms([(6, 1.25), (7, 0.5)]) == "1750ms"


def test_a_replacement_runs_only_the_shards_its_evicted_predecessor_did_not_finish() -> None:
    blob, core = FakeBlobService(), FakeCore()
    records = DoneRecords(blob, core)
    first = sdk_pod("a", 1)  # index 1 of packs of 3: shards 3, 4, 5 (4 s, 5 s, 6 s)
    records.pod_seen(first)
    records.pod_stopping(first, running_for=10.0)  # shards 3 and 4 ended at 4 s and 9 s
    records.pod_seen(sdk_pod("b", 1))
    records.close()
    assert sorted(blob.blobs) == [done_name("night/run-1/align/0", s) for s in (3, 4)]
    assert core.patches == [
        ("genomics", "align-1-b", {"metadata": {"annotations": {RUN_REMAINING_ANNOTATION: "6000ms"}}})
    ]
    assert records.kept == {"align-1-a": 9.0} and records.remainders == 1


def test_a_pod_of_a_fresh_index_is_not_patched_and_its_success_records_its_pack() -> None:
    blob, core = FakeBlobService(), FakeCore()
    records = DoneRecords(blob, core)
    records.pod_seen(sdk_pod("a", 0))
    records.pod_succeeded(sdk_pod("a", 0))
    records.pod_succeeded(sdk_pod("a", 0))  # told twice: written once
    records.close()
    assert core.patches == [] and records.written == 3
    assert sorted(blob.blobs) == sorted(done_name("night/run-1/align/0", s) for s in (0, 1, 2))


class Told:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, float | None]] = []

    def pod_seen(self, pod: dict[str, Any]) -> None:
        self.events.append(("seen", pod["metadata"]["uid"], None))

    def pod_running(self, pod: dict[str, Any]) -> None:
        self.events.append(("running", pod["metadata"]["uid"], None))

    def pod_stopping(self, pod: dict[str, Any], running_for: float) -> None:
        self.events.append(("stopping", pod["metadata"]["uid"], running_for))

    def pod_succeeded(self, pod: dict[str, Any]) -> None:
        self.events.append(("succeeded", pod["metadata"]["uid"], None))

    def pod_ended(self, pod: dict[str, Any]) -> None:
        self.events.append(("ended", pod["metadata"]["uid"], None))


def _watched(uid: str, phase: str, disrupted: bool = False) -> dict[str, Any]:
    meta = {
        "uid": uid, "namespace": "ns", "name": f"j-0-{uid}",
        "ownerReferences": [{"kind": "Job", "name": "j", "uid": "uid-j", "controller": True}],
        "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
    }  # fmt: skip
    conditions = [{"type": "DisruptionTarget", "status": "True"}] if disrupted else []
    return {"metadata": meta, "spec": {}, "status": {"phase": phase, "conditions": conditions}}


def test_the_recorder_tells_a_pod_s_first_sight_start_stop_while_running_success_and_end_once_each() -> None:
    from tests.integration.night.recorder import ClusterRecorder

    told = Told()
    recorder = ClusterRecorder(None, ["ns"], pod_events=told)
    for event in (
        _watched("a", "Pending"), _watched("a", "Running"), _watched("a", "Running", disrupted=True),
        _watched("a", "Failed", disrupted=True), _watched("b", "Pending"), _watched("b", "Running"),
        _watched("b", "Succeeded"), _watched("b", "Succeeded"), _watched("c", "Pending", disrupted=True),
    ):  # fmt: skip
        recorder._pod(event)
    kinds = [(kind, uid) for kind, uid, _ in told.events]
    assert kinds == [
        ("seen", "a"), ("running", "a"), ("stopping", "a"), ("ended", "a"),
        ("seen", "b"), ("running", "b"), ("succeeded", "b"), ("ended", "b"), ("seen", "c"),
    ]  # fmt: skip
    assert told.events[2][2] is not None and told.events[2][2] >= 0


# -- the hand-off of a stopped pack's rest: packs of 3, index 0 runs shards 0-2, index 1 3-5, index 2 6-8 --


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Inline:
    """An executor that runs each task at once: a patch carries the remainder at the clock's time."""

    def submit(self, fn: Any, *args: Any) -> None:
        fn(*args)

    def shutdown(self, wait: bool = True) -> None:
        pass


def bed(hand_off: bool = True) -> tuple[DoneRecords, FakeBlobService, FakeCore, Clock]:
    blob, core, clock = FakeBlobService(), FakeCore(), Clock()
    records = DoneRecords(blob, core, hand_off=hand_off, clock=clock)
    records._patches = records._pool = Inline()  # type: ignore[assignment]
    return records, blob, core, clock


def started(records: DoneRecords, *pods: dict[str, Any]) -> None:
    for p in pods:
        records.pod_seen(p)
        records.pod_running(p)


def patched(core: FakeCore) -> list[tuple[str, str]]:
    return [
        (name, body["metadata"]["annotations"][RUN_REMAINING_ANNOTATION]) for _, name, body in core.patches
    ]


def records_of(blob: FakeBlobService) -> list[str]:
    return sorted(blob.blobs)


def done(*shards: int) -> list[str]:
    return sorted(done_name("night/run-1/align/0", s) for s in shards)


def test_an_evicted_pod_s_rest_goes_to_the_running_peer_whose_work_ends_first() -> None:
    records, blob, core, clock = bed()
    a, b, c = sdk_pod("a", 0), sdk_pod("b", 1), sdk_pod("c", 2)  # 6 s, 15 s, 24 s of shards
    started(records, a, b, c)
    clock.t = 2.0
    records.pod_stopping(a, running_for=2.0)  # shard 0 ended at 1 s; 1 (in progress) and 2 released
    assert patched(core) == [("align-1-b", "18100ms")]  # 15 s + 0.05 + 2 s + 0.05 + 3 s, from 2 s
    assert records.handed_off == 2 and records.kept == {"align-0-a": 1.0}
    clock.t = 20.1
    records.pod_succeeded(b)
    clock.t = 24.0
    records.pod_succeeded(c)
    assert records_of(blob) == done(*range(9)) and records.records_existing == 0


def test_two_released_shards_split_across_two_peers_and_a_peer_stopped_with_one_releases_it_again() -> None:
    records, blob, core, clock = bed()
    lengths = "1,2,3,4,4,4,4,4,5,10"  # index 0: 6 s, index 1: 12 s, index 2: 13 s
    a, b, c = (sdk_pod(uid, i, lengths) for i, uid in enumerate("abc"))
    started(records, a, b, c)
    clock.t = 2.0
    records.pod_stopping(a, running_for=2.0)
    # shard 1 (2 s) to b, which ends first (12.05-14.05), shard 2 (3 s) to c (13.05-16.05)
    assert patched(core) == [("align-1-b", "12050ms"), ("align-2-c", "14050ms")]
    core.patches.clear()
    clock.t = 13.0
    records.pod_stopping(b, running_for=13.0)  # its own pack done at 12 s; shard 1 in progress
    assert records.kept["align-1-b"] == 12.0
    assert patched(core) == [("align-2-c", "5100ms")]  # shard 1 again, after shard 2: 16.1-18.1
    clock.t = 18.1
    records.pod_succeeded(c)
    assert records_of(blob) == done(*range(9)) and records.handed_off == 3
    assert records.records_existing == 0 and records.errors == []


def test_the_stopped_index_s_next_pod_runs_the_shards_no_pod_started_and_waits_for_the_others() -> None:
    records, blob, core, clock = bed()
    lengths = "1,9,1,4,4,4,4,4,5,10"  # index 0: shards 0-2 of 1 s, 9 s, 1 s; index 1: 12 s
    a, b = sdk_pod("a", 0, lengths), sdk_pod("b", 1, lengths)
    started(records, a, b)
    clock.t = 1.5
    records.pod_stopping(a, running_for=1.5)  # shard 1 to b at 12.05-21.05, shard 2 at 21.1-22.1
    assert patched(core) == [("align-1-b", "20600ms")] and records.handed_off == 2
    core.patches.clear()
    clock.t = 13.0
    a2 = sdk_pod("a2", 0, lengths)
    records.pod_seen(a2)  # shard 1 runs in b: waited for; shard 2 still queued behind it: taken back
    assert patched(core) == [("align-0-a2", "8050ms"), ("align-1-b", "8050ms")]  # both end at 21.05
    assert records._runs["a2"].shards == [(2, 1.0)] and records.handed_off == 1
    core.patches.clear()
    clock.t = 13.5
    records.pod_running(a2)  # its 1 s done at 14.5; it ends with shard 1 in b, at 21.05
    assert patched(core) == [("align-0-a2", "7550ms")]
    clock.t = 21.05
    records.pod_succeeded(b)
    records.pod_succeeded(a2)
    assert records_of(blob) == done(0, 1, 2, 3, 4, 5) and records.records_existing == 0


def test_a_peer_stopped_with_a_shard_the_owner_s_next_pod_waits_for_gives_it_to_that_pod() -> None:
    records, blob, core, clock = bed()
    lengths = "1,9,1,4,4,4,4,4,5,10"
    a, b, a2 = sdk_pod("a", 0, lengths), sdk_pod("b", 1, lengths), sdk_pod("a2", 0, lengths)
    started(records, a, b)
    clock.t = 1.5
    records.pod_stopping(a, running_for=1.5)
    clock.t = 13.0
    records.pod_seen(a2)
    clock.t = 13.5
    records.pod_running(a2)
    core.patches.clear()
    clock.t = 15.0
    records.pod_stopping(b, running_for=15.0)  # shard 1 in progress in b
    assert patched(core) == [("align-0-a2", "9050ms")]  # a2 claims it at 15.05, done at 24.05
    assert records.kept["align-1-b"] == 12.0 and records.handed_off == 1
    clock.t = 24.05
    records.pod_succeeded(a2)
    assert records_of(blob) == done(0, 1, 2, 3, 4, 5) and records.records_existing == 0


def test_without_the_hand_off_peers_are_left_alone_and_the_next_pod_runs_the_whole_rest() -> None:
    records, blob, core, clock = bed(hand_off=False)
    a, b, c = sdk_pod("a", 0), sdk_pod("b", 1), sdk_pod("c", 2)
    started(records, a, b, c)
    clock.t = 2.0
    records.pod_stopping(a, running_for=2.0)
    assert core.patches == [] and records.kept == {"align-0-a": 1.0}
    records.pod_seen(sdk_pod("a2", 0))
    assert patched(core) == [("align-0-a2", "5000ms")] and records.remainders == 1
    records.pod_succeeded(b)
    records.pod_ended(b)
    assert records_of(blob) == done(0, 3, 4, 5) and records.handed_off == 0 and records.records_existing == 0


def test_a_record_found_already_there_is_counted() -> None:
    records, _, _, _ = bed(hand_off=False)
    first, second = sdk_pod("a", 0), sdk_pod("a2", 0)  # two pods of one index, both to the end
    started(records, first, second)
    records.pod_succeeded(first)
    records.pod_succeeded(second)
    assert records.written == 3 and records.records_existing == 3


def test_a_pod_that_succeeds_before_its_taken_over_shards_end_says_so_and_releases_them() -> None:
    records, blob, _core, clock = bed()
    a, b, c = sdk_pod("a", 0), sdk_pod("b", 1), sdk_pod("c", 2)
    started(records, a, b, c)
    clock.t = 2.0
    records.pod_stopping(a, running_for=2.0)  # 1 and 2 to b, from 15.05
    clock.t = 15.0
    records.pod_succeeded(b)  # KWOK ended it before the patch: it ran its own pack only
    assert records.errors and "ended before its taken-over shards" in records.errors[0]
    assert set(done(3, 4, 5)) <= set(records_of(blob)) and done(1)[0] not in records_of(blob)
    # Released again, to c, still running: not lost
    assert records.handed_off == 4 and records.records_existing == 0
    clock.t = 40.0
    records.pod_succeeded(c)
    assert records_of(blob) == done(0, *range(1, 9))


def grace_told(core: FakeCore) -> list[tuple[str, str]]:
    key = "kwok.airflow-kueue.io/grace-exit"
    return [(name, body["metadata"]["annotations"][key]) for _, name, body in core.patches
            if key in body["metadata"]["annotations"]]  # fmt: skip


def test_an_evicted_pod_whose_rest_a_peer_finishes_within_its_grace_is_told_to_end_succeeded() -> None:
    """The SDK's stopped pod waits in its grace for its released shards and exits 0 when they are done: the
    bed tells KWOK, before the eviction, when to end it Succeeded, and "fail" once that no longer holds."""
    records, _, core, clock = bed()
    lengths = "1,2,3,4,5,6,1,2,13,10"  # index 0: 6 s; index 1: shards 3-5, 15 s; index 2: shards 6-8, 16 s
    a, b, c = (sdk_pod(uid, i, lengths) for i, uid in enumerate("abc"))
    started(records, a, b, c)
    clock.t = 6.0
    records.pod_succeeded(a)
    clock.t = 14.5
    records.before_eviction("b", "genomics", "align-1-b")  # 3 and 4 done; 5 (6 s) goes to c at 16.05
    assert grace_told(core) == [("align-1-b", "7800ms")]  # c ends it at 22.05; seen half a poll later
    assert records.grace_exits == 1 and records.kept["align-1-b"] == 9.0
    records.pod_stopping(b, running_for=14.5)  # the eviction seen: stopped in the books already
    assert records.kept["align-1-b"] == 9.0 and records.handed_off == 1
    core.patches.clear()
    clock.t = 17.0
    records.pod_stopping(c, running_for=17.0)  # c evicted with 5 in progress: nobody left to take it
    assert grace_told(core) == [("align-1-b", "fail")] and records.grace_exits == 0


def test_an_evicted_pod_whose_peers_are_all_busy_is_not_told_to_wait() -> None:
    records, _, core, clock = bed()
    a, b, c = sdk_pod("a", 0), sdk_pod("b", 1), sdk_pod("c", 2)  # 6 s, 15 s, 24 s of shards
    started(records, a, b, c)
    clock.t = 2.0
    records.before_eviction("a", "genomics", "align-0-a")  # its rest starts on b at 15.05: past 2 s
    assert grace_told(core) == [] and records.grace_exits == 0 and records.handed_off == 2
