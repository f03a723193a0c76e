"""build_indexed_job() and the deterministic Job name."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.identity.airflow_identity import deterministic_job_name as keyed_name
from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal
from airflow_kueue_provider.kueue.k8s_names import is_dns1123_label, is_valid_label_value
from airflow_kueue_provider.kueue.names import (
    DAG_ID_LABEL,
    MANAGED_BY_LABEL,
    MAP_INDEX_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
)
from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job
from airflow_kueue_provider.kueue.spec.job_validation import validate

from ..job_specs import IDENTITY, RUN_ID, spec

# -- building ----------------------------------------------------------------------------------------


def test_minimal_build() -> None:
    job = build_indexed_job(spec())
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "align-shards-1a2b3c4d5e",
            "namespace": "analytics",
            "labels": {
                MANAGED_BY_LABEL: "airflow-kueue-provider",
                QUEUE_NAME_LABEL: "analytics-queue",
            },
        },
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": 10,
            "parallelism": 10,
            "podReplacementPolicy": "Failed",
            "ttlSecondsAfterFinished": 86_400,
            "template": {
                "metadata": {"labels": {MANAGED_BY_LABEL: "airflow-kueue-provider"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "ghcr.io/example/aligner:1.4"}],
                },
            },
        },
    }


def test_full_build_field_by_field() -> None:
    job = build_indexed_job(
        spec(
            completions=1000,
            parallelism=50,
            cmds=["python", "-m", "aligner"],
            arguments=["--reference", "hg38"],
            env={"SHARDS": "1000", "MODE": "fast"},
            resources={"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
            priority_class="nightly",
            spot=True,
            backoff_limit_per_index=2,
            max_failed_indexes=10,
            ttl_seconds_after_finished=3600,
            labels={"team": "genomics"},
            annotations={"fake.airflow-kueue.io/duration-seconds": "5"},
            job_labels={"cost-center": "r-and-d"},
            job_annotations={"example.com/ticket": "GEN-42"},
            service_account_name="aligner",
            node_selector={"agentpool": "batch"},
            identity=IDENTITY,
        )
    )
    metadata, job_spec = job["metadata"], job["spec"]
    assert metadata["labels"][QUEUE_NAME_LABEL] == "analytics-queue"
    assert metadata["labels"][PRIORITY_CLASS_LABEL] == "nightly"
    assert metadata["labels"][MANAGED_BY_LABEL] == "airflow-kueue-provider"
    assert metadata["labels"]["cost-center"] == "r-and-d"
    assert metadata["labels"][DAG_ID_LABEL] == "nightly_genomics"
    assert metadata["labels"][TASK_ID_LABEL] == "align_shards"
    assert metadata["labels"][TRY_NUMBER_LABEL] == "2"
    assert MAP_INDEX_LABEL not in metadata["labels"]
    run_label = metadata["labels"][RUN_ID_LABEL]
    assert run_label != RUN_ID and is_valid_label_value(run_label)
    assert run_label.startswith("scheduled__2026-05-01T02_00_00_00_00-")
    assert metadata["annotations"][RUN_ID_LABEL] == RUN_ID
    assert metadata["annotations"][MAP_INDEX_LABEL] == "-1"
    assert metadata["annotations"]["example.com/ticket"] == "GEN-42"

    assert job_spec["completionMode"] == "Indexed"
    assert (job_spec["completions"], job_spec["parallelism"]) == (1000, 50)
    assert job_spec["backoffLimitPerIndex"] == 2
    assert job_spec["maxFailedIndexes"] == 10
    assert job_spec["ttlSecondsAfterFinished"] == 3600
    assert job_spec["podFailurePolicy"] == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    }
    assert job_spec["suspend"] is True, "created suspended: it runs only once Kueue admits it"

    pod = job_spec["template"]
    assert pod["metadata"]["labels"]["team"] == "genomics"
    assert pod["metadata"]["labels"][DAG_ID_LABEL] == "nightly_genomics"
    assert QUEUE_NAME_LABEL not in pod["metadata"]["labels"]
    assert pod["metadata"]["annotations"] == {"fake.airflow-kueue.io/duration-seconds": "5"}
    pod_spec = pod["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    assert pod_spec["serviceAccountName"] == "aligner"
    assert pod_spec["nodeSelector"] == {"agentpool": "batch"}
    assert pod_spec["tolerations"] == [
        {
            "key": "kubernetes.azure.com/scalesetpriority",
            "operator": "Equal",
            "value": "spot",
            "effect": "NoSchedule",
        }
    ]
    (container,) = pod_spec["containers"]
    assert container["name"] == "main"
    assert container["command"] == ["python", "-m", "aligner"]
    assert container["args"] == ["--reference", "hg38"]
    assert container["env"] == [{"name": "SHARDS", "value": "1000"}, {"name": "MODE", "value": "fast"}]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    json.dumps(job)


def test_build_does_not_share_mutable_inputs() -> None:
    resources = {"requests": {"cpu": "1"}}
    job = build_indexed_job(spec(resources=resources, spot=True))
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"
    job["spec"]["template"]["spec"]["tolerations"][0]["value"] = "x"
    job["spec"]["podFailurePolicy"]["rules"][0]["action"] = "FailJob"
    again = build_indexed_job(spec(resources=resources, spot=True))
    assert resources == {"requests": {"cpu": "1"}}
    assert again["spec"]["template"]["spec"]["tolerations"][0]["value"] == "spot"
    assert again["spec"]["podFailurePolicy"]["rules"][0]["action"] == "Ignore"


def test_mapped_task_gets_map_index_label() -> None:
    job = build_indexed_job(spec(identity=dataclasses.replace(IDENTITY, map_index=7)))
    assert job["metadata"]["labels"][MAP_INDEX_LABEL] == "7"


def test_no_pod_failure_policy_without_spot() -> None:
    job = build_indexed_job(spec(backoff_limit_per_index=1))
    assert "podFailurePolicy" not in job["spec"]
    assert "tolerations" not in job["spec"]["template"]["spec"]


# -- names and label values --------------------------------------------------------------------------

SEAL = IdentitySeal(b"a key only Airflow holds")


def deterministic_job_name(identity: AirflowIdentity, prefix: str | None = None, **kwargs: Any) -> str:
    return keyed_name(identity, prefix, seal=SEAL, **kwargs)


def test_the_name_s_hash_is_keyed() -> None:
    """A tenant without the key cannot compute a task's Job name (and squat it)."""
    other = keyed_name(IDENTITY, seal=IdentitySeal(b"another key"))
    assert other != deterministic_job_name(IDENTITY)
    assert other.rsplit("-", 1)[0] == deterministic_job_name(IDENTITY).rsplit("-", 1)[0]


def test_deterministic_job_name_is_stable_and_readable() -> None:
    name = deterministic_job_name(IDENTITY)
    assert name == deterministic_job_name(IDENTITY)
    assert re.fullmatch(r"nightly-genomics-align-shards-[0-9a-f]{10}", name)
    assert deterministic_job_name(IDENTITY, prefix="Align Shards!").startswith("align-shards-")


def test_deterministic_job_name_differs_per_identity_and_per_try_only_if_asked() -> None:
    names = {
        deterministic_job_name(IDENTITY),
        deterministic_job_name(dataclasses.replace(IDENTITY, dag_id="other")),
        deterministic_job_name(dataclasses.replace(IDENTITY, task_id="other")),
        deterministic_job_name(dataclasses.replace(IDENTITY, run_id="manual__x")),
        deterministic_job_name(dataclasses.replace(IDENTITY, map_index=0)),
        deterministic_job_name(dataclasses.replace(IDENTITY, map_index=1)),
    }
    assert len(names) == 6
    assert deterministic_job_name(dataclasses.replace(IDENTITY, try_number=5)) == deterministic_job_name(
        IDENTITY
    )
    assert deterministic_job_name(IDENTITY, per_try=True) != deterministic_job_name(
        dataclasses.replace(IDENTITY, try_number=5), per_try=True
    )
    assert deterministic_job_name(IDENTITY, per_try=True) != deterministic_job_name(IDENTITY)


def test_deterministic_job_name_of_unusable_text() -> None:
    name = deterministic_job_name(AirflowIdentity("___", "!!!", "r"))
    assert re.fullmatch(r"job-[0-9a-f]{10}", name)


@given(st.text(max_size=120), st.text(max_size=120), st.text(max_size=60), st.integers(-1, 10_000), st.text())
def test_deterministic_job_name_is_always_a_valid_indexed_job_name(
    dag_id: str, task_id: str, run_id: str, map_index: int, prefix: str
) -> None:
    identity = AirflowIdentity(dag_id, task_id, run_id, map_index=map_index)
    for name in (deterministic_job_name(identity), deterministic_job_name(identity, prefix=prefix)):
        assert is_dns1123_label(name, 52)
        validate(spec(name=name, completions=100_000, parallelism=10))


def test_min_parallelism_becomes_kueue_s_partial_admission_annotation() -> None:
    job = build_indexed_job(spec(parallelism=6, min_parallelism=2))
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "2"
    assert "kueue.x-k8s.io/job-min-parallelism" not in build_indexed_job(spec()).get("metadata", {}).get(
        "annotations", {}
    )
