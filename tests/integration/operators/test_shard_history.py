"""Shard history on the process nodes: the real operator runs the Monte Carlo pricer on two nights of one
task, against Azurite.

- Night 1 has no history: it runs as today (one shard per pod, no ``shard_history`` in the result) and
  records each shard's length (the SDK's ``run_seconds``) in the task's history blob, before the clean-up.
- Night 2 logs "packing from shard history", packs the shards into fewer pods than night 1, says so in its
  result, and adds itself to the history.
- Night 3 of another shard count runs as today again, and starts the history over.
- A program without the SDK (KWOK's fake pods) teaches the history from its pods' times.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.hooks.shard_history_store import history_blob
from airflow_kueue_provider.kueue.checkpoints.pod_run_lengths import pod_run_seconds
from airflow_kueue_provider.kueue.checkpoints.shard_history import ShardHistory
from airflow_kueue_provider.kueue.names import INDEX_ANNOTATION
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator, KueueJobFailed

from ..cluster import KueueEnv
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture
from ..worker.eviction_bed import PRICER, pricer_arguments
from .conftest import CONN_ID

SAID = "packing from shard history: learned from 1 night (scheduled__1), 8 of 8 shards"


def _night(
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    log: Path,
    run_id: str,
    shards: int,
) -> dict[str, Any]:
    operator = KueueIndexedJobOperator(
        task_id="price",
        namespace=queues.namespace,
        queue_name=queues.local_queue,
        image="example.invalid/pricer:1",
        cmds=["python", "-m", PRICER],
        arguments=pricer_arguments(log, items=3, every=2, item_seconds=0.05),
        completions=shards,
        parallelism=2,
        spot=True,
        resources={"requests": {"cpu": "250m", "memory": "256Mi"}},
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
    )
    ti = SimpleNamespace(dag_id="nightly", task_id="price", run_id=run_id, try_number=1, map_index=-1)
    return operator.execute({"ti": ti})  # type: ignore[typeddict-item]


def _history(blob: SimpleNamespace) -> ShardHistory | None:
    client = blob.service.get_container_client(blob.container)
    return ShardHistory.from_json(
        json.loads(client.download_blob(history_blob("nightly", "price")).readall())
    )


def test_the_second_night_packs_from_what_the_first_one_learned(
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = _night(queues, blob, tmp_path / "items-1", "scheduled__1", 8)
    assert first["completed_indexes"] == "0-7" and "shard_history" not in first, first
    assert "packing from shard history" not in capsys.readouterr().out
    (one,) = queues.jobs()
    assert one.spec.completions == 8, "no history: one shard per pod, as today"
    learned = _history(blob)
    assert learned is not None and learned.nights == ("scheduled__1",), learned
    assert all(s is not None and 0 < s < 60 for s in learned.seconds), learned.seconds
    assert set(learned.to_json()) == {
        "version",
        "shard_count",
        "nights",
        "seconds",
        "partial",
        "tonight",
        "pod_start_seconds",  # a clean first night: what a pod cost beside its shard
    }
    assert learned.pod_start is not None and 0 <= learned.pod_start < 60, learned.pod_start

    second = _night(queues, blob, tmp_path / "items-2", "scheduled__2", 8)
    assert SAID in capsys.readouterr().out
    assert second["completed_indexes"] == "0-7", second
    assert second["shard_history"] == {"nights": ["scheduled__1"], "shards_learned": 8}, second
    (two,) = [j for j in queues.jobs() if j.metadata.name != one.metadata.name]
    env = {e.name: e.value for e in two.spec.template.spec.containers[0].env if e.value is not None}
    assert two.spec.completions < 8 and "AIRFLOW_KUEUE_SHARDS_PER_POD" in env, (two.spec.completions, env)
    after = _history(blob)
    assert after is not None and after.nights == ("scheduled__1", "scheduled__2"), after

    third = _night(queues, blob, tmp_path / "items-3", "scheduled__3", 6)
    assert "packing from shard history" not in capsys.readouterr().out
    assert third["completed_indexes"] == "0-5" and "shard_history" not in third, third
    (three,) = [j for j in queues.jobs() if j.metadata.name not in (one.metadata.name, two.metadata.name)]
    assert three.spec.completions == 6, "history of another shard count: one shard per pod, as today"
    restarted = _history(blob)
    assert restarted is not None and (restarted.shard_count, restarted.nights) == (6, ("scheduled__3",))


def test_a_failed_attempt_records_the_shards_that_finished_and_its_retry_is_the_same_night(
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,
    tmp_path: Path,
) -> None:
    """Shard 2 fails on the first try: the try fails, its other shards' lengths are recorded; the retry runs
    shard 2 alone and adds it to the same night."""
    arguments = [
        *pricer_arguments(tmp_path / "items", items=3, every=2, item_seconds=0.05),
        "--fail-once",
        "2",
    ]
    operator = KueueIndexedJobOperator(
        task_id="price",
        namespace=queues.namespace,
        queue_name=queues.local_queue,
        image="example.invalid/pricer:1",
        cmds=["python", "-m", PRICER],
        arguments=arguments,
        completions=4,
        parallelism=2,
        spot=True,
        backoff_limit_per_index=0,
        resources={"requests": {"cpu": "250m", "memory": "256Mi"}},
        deferrable=False,
        checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
    )

    def ti(try_number: int) -> SimpleNamespace:
        return SimpleNamespace(
            dag_id="nightly", task_id="price", run_id="scheduled__1", try_number=try_number, map_index=-1
        )

    with pytest.raises(KueueJobFailed):
        operator.execute({"ti": ti(1)})  # type: ignore[typeddict-item]
    failed = _history(blob)
    assert failed is not None and failed.nights == ("scheduled__1",), failed
    assert failed.seconds[2] is None and all(failed.seconds[s] for s in (0, 1, 3)), failed.seconds

    result = operator.execute({"ti": ti(2)})  # type: ignore[typeddict-item]
    assert (result["completed_indexes"], result["attempts"]) == ("0-3", 2), result
    retried = _history(blob)
    assert retried is not None and retried.nights == ("scheduled__1",), "a retry is the same night"
    assert all(retried.seconds) and retried.seconds[:2] == failed.seconds[:2], retried.seconds


def _pod_seconds(pods: list[dict[str, Any]]) -> dict[int, float]:
    """``{index: seconds}`` each succeeded pod's container ran, as the pods themselves say."""
    return {
        int(pod["metadata"]["annotations"][INDEX_ANNOTATION]): seconds
        for pod in pods
        if (seconds := pod_run_seconds(pod, None)) is not None
    }


def test_a_program_without_the_sdk_teaches_the_history_its_pods_lengths(
    kueue_env: KueueEnv, blob: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    """KWOK's fake pods write no done records: each shard's length comes from the pod that ran it alone (its
    container's terminated times), so a night of plain containers still teaches the next night."""
    lengths = {0: 2, 1: 5, 2: 3, 3: 2}

    def night(run_id: str) -> dict[str, Any]:
        operator = KueueIndexedJobOperator(
            task_id="price",
            namespace=kueue_env.namespace,
            queue_name=kueue_env.local_queue,
            image="example.invalid/plain:1",
            completions=4,
            parallelism=4,
            annotations={f"kwok.airflow-kueue.io/run-duration-{i}": f"{s}s" for i, s in lengths.items()},
            resources={"requests": {"cpu": "100m", "memory": "64Mi"}},
            deferrable=False,
            checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
        )
        ti = SimpleNamespace(dag_id="nightly", task_id="price", run_id=run_id, try_number=1, map_index=-1)
        return operator.execute({"ti": ti})  # type: ignore[typeddict-item]

    result = night("scheduled__1")
    assert result["completed_indexes"] == "0-3", result
    assert "recorded 4 shard lengths of" in capsys.readouterr().out
    raw = blob.service.get_container_client(blob.container).download_blob(history_blob("nightly", "price"))
    learned = ShardHistory.from_json(json.loads(raw.readall()))
    assert learned is not None and learned.nights == ("scheduled__1",), raw
    assert learned.pod_start is not None, "a clean night: the pods' cost beside their lengths"
    assert learned.from_pods, "no done records: the program runs one shard per index"
    (job,) = kueue_env.jobs()
    hook = KueueHook("kubernetes_default")
    # What the pods' own times say, not what KWOK was asked: on 2 starved cores KWOK once stamped 9 s on all
    # four (2/5/3/2 s asked), and the history rightly learned what the pods said.
    ran = _pod_seconds(hook.pods_of_job_bounded(kueue_env.namespace, job.metadata.name, 10))
    assert sorted(ran) == sorted(lengths), ran
    assert dict(enumerate(learned.seconds)) == pytest.approx(ran, abs=0.01), (learned.seconds, ran)
    paged = hook.pods_of_job_bounded(kueue_env.namespace, job.metadata.name, 3, page=2)
    assert len(paged) == 3, "read in pages of 2, no more than 3 of its 4 pods"

    second = night("scheduled__2")
    out = capsys.readouterr().out
    assert second["completed_indexes"] == "0-3" and "shard_history" not in second, second
    assert "for the forecast only" in out and "packing from shard history" not in out, out
    assert "forecast: start" in out and "from 1 night of shard history" in out, out
    assert all(j.spec.completions == 4 for j in kueue_env.jobs()), "never packed: one shard per pod"
