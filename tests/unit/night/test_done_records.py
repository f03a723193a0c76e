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
        assert overwrite is False
        self.blobs.setdefault(name, data)


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


def sdk_pod(uid: str, index: int) -> dict[str, Any]:
    env = {
        "AIRFLOW_KUEUE_SHARDS": "0-9",
        "AIRFLOW_KUEUE_SHARDS_PER_POD": "3",
        "AIRFLOW_KUEUE_CHECKPOINT_URL": "http://127.0.0.1:10000/devstoreaccount1/shards?sig=x",
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": "night/run-1/align/0/",
    }
    p = pod(index, env)
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

    def pod_stopping(self, pod: dict[str, Any], running_for: float) -> None:
        self.events.append(("stopping", pod["metadata"]["uid"], running_for))

    def pod_succeeded(self, pod: dict[str, Any]) -> None:
        self.events.append(("succeeded", pod["metadata"]["uid"], None))


def _watched(uid: str, phase: str, disrupted: bool = False) -> dict[str, Any]:
    meta = {
        "uid": uid, "namespace": "ns", "name": f"j-0-{uid}",
        "ownerReferences": [{"kind": "Job", "name": "j", "uid": "uid-j", "controller": True}],
        "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
    }  # fmt: skip
    conditions = [{"type": "DisruptionTarget", "status": "True"}] if disrupted else []
    return {"metadata": meta, "spec": {}, "status": {"phase": phase, "conditions": conditions}}


def test_the_recorder_tells_a_pod_s_first_sight_its_stop_while_running_and_its_success_once_each() -> None:
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
    assert kinds == [("seen", "a"), ("stopping", "a"), ("seen", "b"), ("succeeded", "b"), ("seen", "c")]
    assert told.events[1][2] is not None and told.events[1][2] >= 0
