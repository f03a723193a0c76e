"""The Job operator's shard history: read at run time only (once per try) to pack from, never for a pinned
shape, another shard count or without checkpointing; each attempt's done records merged as its night, and a
failure to record is only a warning."""

from __future__ import annotations

import copy
from types import SimpleNamespace, TracebackType
from typing import Any

import pytest

from airflow_kueue_provider.hooks.shard_history_store import history_blob
from airflow_kueue_provider.kueue.checkpoints.ledger import Attempt, RunLedger
from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name
from airflow_kueue_provider.kueue.checkpoints.shard_history import ShardHistory
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.trigger_event import KueueEvent
from airflow_kueue_provider.operators import shard_history_step
from airflow_kueue_provider.operators.checkpointing import CheckpointSession
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.storage.blob_errors import BlobPreconditionFailed, BlobUnavailable

IDENTITY = AirflowIdentity("nightly", "price", "scheduled__2", try_number=1)


class Blobs:
    """A Blob hook over a dict (one container), with its shard container's done records beside it."""

    def __init__(self, error: Exception | None = None) -> None:
        self.blobs: dict[str, tuple[dict[str, Any], str]] = {}
        self.shard_blobs: dict[str, tuple[dict[str, Any], str]] = {}
        self.error, self.reads, self.opened = error, 0, 0

    def __enter__(self) -> Blobs:
        self.opened += 1
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        return None

    def read_json(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        doc, etag = self.blobs.get(name, (None, None))
        return copy.deepcopy(doc), etag

    def write_json(
        self, name: str, data: dict[str, Any], *, if_match: str | None = None, if_none_match: bool = False
    ) -> str:
        if self.error is not None:
            raise self.error
        _, etag = self.blobs.get(name, (None, None))
        if (if_none_match and etag) or (if_match and etag != if_match):
            raise BlobPreconditionFailed(name)
        self.blobs[name] = (copy.deepcopy(data), f"e{len(self.blobs)}-{id(data)}")
        return self.blobs[name][1]

    def delete(self, name: str) -> bool:
        return self.blobs.pop(name, None) is not None

    def container_hook(self, name: str) -> SimpleNamespace:
        shard_blobs = self.shard_blobs

        class Container(Blobs):
            def read_json(self, blob: str) -> tuple[dict[str, Any] | None, str | None]:
                return shard_blobs.get(blob, (None, None))

        return Container()  # type: ignore[return-value]


@pytest.fixture
def blobs(monkeypatch: pytest.MonkeyPatch) -> Blobs:
    made = Blobs()
    monkeypatch.setattr(shard_history_step, "BlobStoreHook", lambda conn_id, container: made)
    return made


def _op(**kwargs: Any) -> KueueIndexedJobOperator:
    base = {"task_id": "price", "queue_name": "q", "image": "i", "completions": 4, "checkpointing": "blob"}
    return KueueIndexedJobOperator(**{**base, **kwargs})


def _with_history(blobs: Blobs, shard_count: int = 4, **seconds: float) -> None:
    lengths = {int(k[1:]): v for k, v in seconds.items()}
    history = ShardHistory.empty(shard_count).merge_night("scheduled__1", shard_count, lengths)
    blobs.blobs[history_blob("nightly", "price")] = (history.to_json(), "e0")


def test_at_parse_time_nothing_is_read(blobs: Blobs) -> None:
    _with_history(blobs, s0=30.0, s1=1.0, s2=1.0, s3=1.0)
    op = _op(expected_shard_duration=2)
    assert op._packing().learned is None and blobs.opened == 0
    assert op._learned_lengths(4) is None and op._history_result(4) == {}


def test_a_run_packs_from_the_history_read_once_per_try(blobs: Blobs, capsys: Any) -> None:
    _with_history(blobs, s0=30.0, s1=1.0, s2=1.0, s3=1.0)
    op = _op()
    op._identity = IDENTITY
    choices = [op._packing() for _ in range(3)]
    learned = choices[0].learned
    assert learned is not None and dict(learned.seconds) == {0: 30.0, 1: 1.0, 2: 1.0, 3: 1.0}
    assert all(c.learned == learned for c in choices) and blobs.reads == 1, "one read per try"
    assert op._learned_lengths(4) == learned
    out = capsys.readouterr().out  # the operator's log: the task's
    assert out.count("packing from shard history: learned from 1 night (scheduled__1), 4 of 4 shards") == 1
    assert op._history_result(4) == {"shard_history": {"nights": ["scheduled__1"], "shards_learned": 4}}
    op._identity = AirflowIdentity("nightly", "price", "scheduled__2", try_number=2)
    op._packing()
    assert blobs.reads == 2, "a new try reads again"


@pytest.mark.parametrize(
    ("kwargs", "reads"),
    [
        ({"completions": 5}, 1),  # history of 4 shards: another shard count
        ({"shards_per_pod": 2}, 0),  # the DAG pinned the shape
        ({"checkpointing": None}, 0),
    ],
)
def test_a_task_without_usable_history_packs_as_today(
    blobs: Blobs, kwargs: dict[str, Any], reads: int
) -> None:
    _with_history(blobs, s0=30.0, s1=1.0, s2=1.0, s3=1.0)
    op, today = _op(**kwargs), _op(**kwargs)
    op._identity = IDENTITY
    assert op._packing() == today._packing() and op._packing().learned is None
    assert op._history_result(int(op.completions)) == {} and blobs.reads == reads


def test_no_history_or_an_unreadable_one_packs_as_today(blobs: Blobs, capsys: Any) -> None:
    op = _op()
    op._identity = IDENTITY
    assert op._packing() == _op()._packing()
    blobs.error = BlobUnavailable("down")
    op._identity = AirflowIdentity("nightly", "price", "scheduled__2", try_number=2)
    assert op._packing() == _op()._packing()
    assert "could not read the shard history (down); packing without it" in capsys.readouterr().out


def _session(blobs: Blobs, shard_count: int = 4) -> CheckpointSession:
    session = CheckpointSession.__new__(CheckpointSession)
    session.prefix, session.shard_count = "p", shard_count
    session.place = SimpleNamespace(hook=blobs, shard_container="shards-c")  # type: ignore[assignment]
    listed = [int(name.split("/")[-2]) for name in blobs.shard_blobs]  # the shard folder's listing
    session.done_shards = lambda: IndexSet.from_indexes(listed)  # type: ignore[method-assign]
    return session


def _event(name: str = "job-1", uid: str = "uid-1") -> KueueEvent:
    return KueueEvent("succeeded", "done", "Job", name, "team", uid)


def _ledger(completed: str) -> RunLedger:
    attempt = Attempt(1, "job-1", IndexSet.range(0, 4), completed=IndexSet.parse(completed))
    return RunLedger(4, (attempt,))


def test_an_attempt_records_the_done_shards_lengths_as_its_night(blobs: Blobs) -> None:
    records: dict[int, dict[str, Any]] = {
        0: {"run_seconds": 12.0},
        1: {"run_seconds": 3.0, "resumed": True},
        2: {"output": {}},  # an SDK before run_seconds
        3: {"run_seconds": 99.0},  # not completed by this attempt (the ledger says)
    }
    for shard, doc in records.items():
        blobs.shard_blobs[done_name("p", shard)] = (doc, "x")
    op = _op()
    assert _pods_client(op, []) == []  # shard 2 has no figure: its pod would be asked (none here)
    op._record_history(IDENTITY, _session(blobs), _ledger("0-2"), _event())
    history = ShardHistory.from_json(blobs.blobs[history_blob("nightly", "price")][0])
    assert history is not None and history.nights == ("scheduled__2",)
    assert history.seconds == (12.0, 3.0, None, None) and history.partial == IndexSet.parse("1")


def test_a_failure_to_record_is_only_a_warning(blobs: Blobs, capsys: Any) -> None:
    blobs.shard_blobs[done_name("p", 0)] = ({"run_seconds": 12.0}, "x")
    blobs.error = BlobUnavailable("Blob Storage is away")
    op = _op()
    _pods_client(op, [])
    op._record_history(IDENTITY, _session(blobs), _ledger("0"), _event())
    assert "could not record the shard history of job-1 (Blob Storage is away)" in capsys.readouterr().out


def test_nothing_is_recorded_without_checkpointing_or_a_ledger(blobs: Blobs) -> None:
    op = _op()
    op._record_history(IDENTITY, object(), _ledger("0"), _event())
    op._record_history(IDENTITY, _session(blobs), None, _event())
    op._record_history(IDENTITY, _session(blobs), _ledger("0"), _event("another-job"))
    assert blobs.blobs == {} and blobs.reads == 0


def _pod(
    index: int, seconds: float, *, uid: str = "uid-1", phase: str = "Succeeded", code: int = 0
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"job-1-{index}-x",
            "creationTimestamp": "2026-12-05T01:00:00Z",
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "ownerReferences": [{"controller": True, "kind": "Job", "name": "job-1", "uid": uid}],
        },
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {
                        "terminated": {
                            "exitCode": code,
                            "startedAt": "2026-12-05T01:00:00Z",
                            "finishedAt": f"2026-12-05T01:00:{int(seconds):02d}Z",
                        }
                    },
                }
            ],
        },
    }


def _pods_client(op: KueueIndexedJobOperator, pods: list[dict[str, Any]]) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []

    def pods_of_job_bounded(namespace: str, name: str, most: int) -> list[dict[str, Any]]:
        assert most == shard_history_step.MAX_TIMED_PODS
        calls.append((namespace, name))
        return pods

    op._client = lambda: SimpleNamespace(hook=SimpleNamespace(pods_of_job_bounded=pods_of_job_bounded))  # type: ignore[method-assign,return-value,assignment]
    return calls


def test_a_program_without_the_sdk_teaches_its_lengths_from_its_pods(blobs: Blobs, capsys: Any) -> None:
    op = _op()
    pods = [
        _pod(0, 12),
        _pod(1, 7),
        _pod(2, 30, uid="a-namesake-job"),  # not this Job's pod: bound by its controller uid
        _pod(3, 9, phase="Failed", code=1),  # did not succeed
    ]
    calls = _pods_client(op, pods)
    op._record_history(IDENTITY, _session(blobs), _ledger("0-3"), _event())
    history = ShardHistory.from_json(blobs.blobs[history_blob("nightly", "price")][0])
    assert history is not None and history.seconds == (12.0, 7.0, None, None) and history.from_pods
    assert calls == [("team", "job-1")], "one LIST of the Job's pods"
    assert "recorded 2 shard lengths of job-1 (2 from pod times)" in capsys.readouterr().out


def test_done_records_win_and_spare_the_pod_list(blobs: Blobs) -> None:
    for shard in range(4):
        blobs.shard_blobs[done_name("p", shard)] = ({"run_seconds": 2.5}, "x")
    op = _op()
    calls = _pods_client(op, [_pod(i, 40) for i in range(4)])
    op._record_history(IDENTITY, _session(blobs), _ledger("0-3"), _event())
    history = ShardHistory.from_json(blobs.blobs[history_blob("nightly", "price")][0])
    assert history is not None and history.seconds == (2.5, 2.5, 2.5, 2.5) and calls == []


def test_packed_pods_say_nothing_of_each_shard(blobs: Blobs) -> None:
    attempt = Attempt(1, "job-1", IndexSet.range(0, 4), completed=IndexSet.range(0, 4), packing="2")
    op = _op()
    calls = _pods_client(op, [_pod(i, 40) for i in range(2)])
    op._record_history(IDENTITY, _session(blobs), RunLedger(4, (attempt,)), _event())
    history = ShardHistory.from_json(blobs.blobs[history_blob("nightly", "price")][0])
    assert history is not None and history.seconds == (None,) * 4 and calls == []


def test_a_history_timed_from_pods_forecasts_but_never_packs(blobs: Blobs, capsys: Any) -> None:
    lengths = {0: 30.0, 1: 1.0, 2: 1.0, 3: 1.0}
    history = ShardHistory.empty(4).merge_night("scheduled__1", 4, lengths, from_pods=True)
    blobs.blobs[history_blob("nightly", "price")] = (history.to_json(), "e0")
    op = _op()
    op._identity = IDENTITY
    assert op._packing() == _op()._packing() and op._packing().learned is None, "one shard per pod"
    learned = op._learned_lengths(4)
    assert learned is not None and not learned.packable, "the forecast still reads it"
    assert op._history_result(4) == {}
    out = capsys.readouterr().out
    assert "from pod times (the program writes no done records): for the forecast only" in out
    assert "packing from shard history" not in out


def test_an_attempt_with_an_eviction_learns_the_pods_start_from_the_pods(blobs: Blobs) -> None:
    """Its running time holds the eviction: the pods' own creation-to-start is taken instead."""
    attempt = Attempt(1, "job-1", IndexSet.range(0, 2), completed=IndexSet.range(0, 2), evictions=1)
    op = _op(completions=2)
    pods = [_pod(0, 12), _pod(1, 7)]
    for pod in pods:  # created 3 s before their container started
        pod["metadata"]["creationTimestamp"] = "2026-12-05T00:59:57Z"
    _pods_client(op, pods)
    op._record_history(IDENTITY, _session(blobs, 2), RunLedger(2, (attempt,)), _event())
    history = ShardHistory.from_json(blobs.blobs[history_blob("nightly", "price")][0])
    assert history is not None and history.pod_start == 3.0 and history.seconds == (12.0, 7.0)


def test_the_forecasts_error_joins_its_night_and_reaches_the_next_nights_lengths(
    blobs: Blobs, capsys: Any
) -> None:
    _with_history(blobs, s0=30.0, s1=1.0, s2=1.0, s3=1.0)
    op = _op()
    op._identity = AirflowIdentity("nightly", "price", "scheduled__1", try_number=1)
    op._learn_wait_error(160.0)
    assert (
        "the run ended 160 s later than the forecast's model said; the next nights' forecasts add"
        in capsys.readouterr().out
    )
    history = ShardHistory.from_json(blobs.blobs[history_blob("nightly", "price")][0])
    assert history is not None and history.nights == ("scheduled__1",) and history.wait_errors == (160.0,)
    op._identity = IDENTITY  # the next night reads it
    learned = op._learned_lengths(4)
    assert learned is not None and learned.wait_bias_seconds == 160.0


@pytest.mark.parametrize("kwargs", [{"shards_per_pod": 2}, {"checkpointing": None}])
def test_no_history_kept_no_forecast_error_kept(blobs: Blobs, kwargs: dict[str, Any]) -> None:
    op = _op(**kwargs)
    op._identity = IDENTITY
    op._learn_wait_error(10.0)
    assert blobs.blobs == {} and blobs.opened == 0


def test_a_failure_to_keep_the_forecasts_error_is_only_a_warning(blobs: Blobs, capsys: Any) -> None:
    blobs.error = BlobUnavailable("Blob Storage is away")
    op = _op()
    op._identity = IDENTITY
    op._learn_wait_error(10.0)
    out = capsys.readouterr().out
    assert "could not record the forecast's error in the shard history (Blob Storage is away)" in out
