"""The operator's checkpoint helpers that need no storage."""

from __future__ import annotations

import json

import pytest

from airflow_kueue_provider.kueue.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.checkpointing import Checkpointing, CheckpointSession


def _job(env: list[dict[str, object]]) -> dict[str, object]:
    return {"spec": {"template": {"spec": {"containers": [{"name": "main", "env": env}]}}}}


def test_job_shards_come_from_the_job_it_was_created_with() -> None:
    job = _job([{"name": "AIRFLOW_KUEUE_SHARDS", "value": "2,5,8"}])
    assert str(CheckpointSession.job_shards(job, IndexSet.range(0, 10))) == "2,5,8"
    assert str(CheckpointSession.job_shards(_job([]), IndexSet.range(0, 10))) == "0-9"


def test_checkpointing_parameter_forms() -> None:
    assert Checkpointing.from_param(None) is None
    assert Checkpointing.from_param("blob") == Checkpointing(conn_id="blob")
    assert Checkpointing.from_param({"conn_id": "blob", "container": "c"}) == Checkpointing("blob", "c")


def test_workload_identity_pods_get_the_service_account_label_and_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.setenv(
        "AIRFLOW_CONN_AKS_BLOB",
        json.dumps(
            {
                "conn_type": "wasb",
                "host": "https://genomicsdata.blob.core.windows.net",
                "extra": {"workload_identity_tenant_id": "00000000-0000-0000-0000-000000000000"},
            }
        ),
    )
    config = Checkpointing("aks_blob", "checkpoints", workload_identity_service_account="genomics-sa")
    session = CheckpointSession(config, AirflowIdentity("nightly", "align", "scheduled__2026-11-30"), 1000)
    manifest = {
        "spec": {
            "completions": 1000,
            "parallelism": 50,
            "template": {
                "metadata": {},
                "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "main"}]},
            },
        }
    }

    shaped = session.shape_job(manifest, IndexSet.parse("3,7,900-999"))

    pod = shaped["spec"]["template"]
    assert shaped["spec"]["completions"] == 102 and shaped["spec"]["parallelism"] == 50
    assert pod["spec"]["serviceAccountName"] == "genomics-sa"
    assert pod["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        "AIRFLOW_KUEUE_SHARDS": "3,7,900-999",
        "AIRFLOW_KUEUE_CHECKPOINT_URL": "https://genomicsdata.blob.core.windows.net/checkpoints",
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": "nightly/scheduled__2026-11-30/align",
        "AIRFLOW_KUEUE_GRACE_SECONDS": "25",
    }
