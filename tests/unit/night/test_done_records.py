"""The bed's stand-in for the worker SDK's done records: which shards a fake pod ran, and how long each."""

from __future__ import annotations

from typing import Any

from devcluster.fake_pod_lengths import SHARD_DURATIONS_ANNOTATION
from tests.integration.night.done_records import shards_run_by


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
