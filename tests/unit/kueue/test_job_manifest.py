from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_kueue_provider.kueue.airflow_identity import (
    DAG_ID_LABEL,
    MAP_INDEX_LABEL,
    RUN_ID_LABEL,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
    AirflowIdentity,
    deterministic_job_name,
)
from airflow_kueue_provider.kueue.job_manifest import (
    MANAGED_BY_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    IndexedJobSpec,
    InvalidJobSpec,
    build_indexed_job,
    validate,
)
from airflow_kueue_provider.kueue.k8s_names import is_dns1123_label, is_valid_label_value

RUN_ID = "scheduled__2026-05-01T02:00:00+00:00"
IDENTITY = AirflowIdentity(dag_id="nightly_genomics", task_id="align_shards", run_id=RUN_ID, try_number=2)


def spec(**overrides: Any) -> IndexedJobSpec:
    base = IndexedJobSpec(
        name="align-shards-1a2b3c4d5e",
        namespace="analytics",
        queue_name="analytics-queue",
        image="ghcr.io/example/aligner:1.4",
        completions=10,
    )
    return dataclasses.replace(base, **overrides)


def template(**spec_fields: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {}, "spec": spec_fields}


# -- validation: every row must name the parameter to change ---------------------------------------

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("empty name", {"name": ""}, "name"),
    ("uppercase name", {"name": "AlignShards"}, "name"),
    ("underscore name", {"name": "align_shards"}, "name"),
    ("name over 52", {"name": "a" * 53}, "name"),
    ("name starts with dash", {"name": "-align"}, "name"),
    ("uppercase namespace", {"namespace": "Analytics"}, "namespace"),
    ("empty namespace", {"namespace": ""}, "namespace"),
    ("empty queue", {"queue_name": ""}, "queue_name"),
    ("queue with spaces", {"queue_name": "analytics queue"}, "queue_name"),
    ("queue over 63", {"queue_name": "q" * 64}, "queue_name"),
    ("zero completions", {"completions": 0}, "completions"),
    ("too many completions", {"completions": 100_001}, "completions"),
    ("bool completions", {"completions": True}, "completions"),
    ("string completions", {"completions": "10"}, "completions"),
    ("negative parallelism", {"parallelism": -1}, "parallelism"),
    ("parallelism over 10000", {"completions": 20_000, "parallelism": 10_001}, "parallelism"),
    ("parallelism over completions", {"parallelism": 11}, "parallelism"),
    ("unknown resources key", {"resources": {"request": {"cpu": "1"}}}, "resources"),
    ("quantity 'two'", {"resources": {"requests": {"cpu": "two"}}}, "resources"),
    ("negative quantity", {"resources": {"requests": {"memory": "-1Gi"}}}, "resources"),
    (
        "cpu limit below request",
        {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}},
        "resources",
    ),
    (
        "memory limit below request",
        {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
        "resources",
    ),
    ("requests not a dict", {"resources": {"requests": ["cpu"]}}, "resources"),
    ("claims not a list", {"resources": {"claims": "gpu"}}, "resources"),
    ("bad resource name", {"resources": {"requests": {"cpu cores": "1"}}}, "resources"),
    ("max failed without per-index backoff", {"max_failed_indexes": 2}, "max_failed_indexes"),
    (
        "max failed over completions",
        {"backoff_limit_per_index": 1, "max_failed_indexes": 11},
        "max_failed_indexes",
    ),
    ("negative per-index backoff", {"backoff_limit_per_index": -1}, "backoff_limit_per_index"),
    ("negative ttl", {"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished"),
    ("empty image", {"image": ""}, "image"),
    ("image with space", {"image": "python 3.12"}, "image"),
    ("env name starting with digit", {"env": {"1BAD": "x"}}, "env"),
    ("env name with '='", {"env": {"A=B": "x"}}, "env"),
    ("env value not a string", {"env": {"SHARDS": 3}}, "env"),
    ("env list item without name", {"env": [{"value": "x"}]}, "env"),
    ("env value and valueFrom", {"env": [{"name": "A", "value": "x", "valueFrom": {}}]}, "env"),
    ("cmds as one string", {"cmds": "python run.py"}, "cmds"),
    ("arguments not strings", {"arguments": [1, 2]}, "arguments"),
    ("template is a Pod", {"job_template": {"apiVersion": "v1", "kind": "Pod"}}, "job_template"),
    ("template NonIndexed", {"job_template": template(completionMode="NonIndexed")}, "job_template"),
    (
        "template containers not a list",
        {"job_template": template(template={"spec": {"containers": {}}})},
        "job_template",
    ),
    ("priority class with underscore", {"priority_class": "High_Priority"}, "priority_class"),
    ("bad label key", {"labels": {"bad key!": "v"}}, "labels"),
    ("label value over 63", {"labels": {"team": "x" * 64}}, "labels"),
    ("reserved queue label", {"labels": {QUEUE_NAME_LABEL: "other"}}, "labels"),
    ("reserved provider job label", {"job_labels": {DAG_ID_LABEL: "x"}}, "job_labels"),
    ("node selector value with space", {"node_selector": {"pool": "a b"}}, "node_selector"),
    ("annotation value not a string", {"annotations": {"fake/duration": 30}}, "annotations"),
    ("bad service account", {"service_account_name": "My_SA"}, "service_account_name"),
    ("identity without dag id", {"identity": AirflowIdentity("", "t", "r")}, "identity"),
    ("identity with negative try", {"identity": AirflowIdentity("d", "t", "r", try_number=-1)}, "identity"),
    ("spot not a bool", {"spot": "yes"}, "spot"),
]


@pytest.mark.parametrize(
    ("overrides", "parameter"), [row[1:] for row in INVALID], ids=[row[0] for row in INVALID]
)
def test_invalid_inputs_name_the_parameter(overrides: dict[str, Any], parameter: str) -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(**overrides))
    assert raised.value.parameters == (parameter,), raised.value.problems
    assert f"- {parameter}: " in str(raised.value)
    # build_indexed_job validates too.
    with pytest.raises(InvalidJobSpec):
        build_indexed_job(spec(**overrides))


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(name="Bad_Name", completions=0, image="", queue_name=""))
    assert set(raised.value.parameters) == {"name", "completions", "image", "queue_name"}
    assert isinstance(raised.value, ValueError)


def test_messages_say_what_to_change() -> None:
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(max_failed_indexes=2))
    assert "set backoff_limit_per_index" in str(raised.value)
    with pytest.raises(InvalidJobSpec) as raised:
        validate(spec(resources={"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}))
    assert "limits.cpu ('500m') is below requests.cpu ('1')" in str(raised.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"parallelism": 0},
        {"completions": 100_000, "parallelism": 10_000},
        {"name": "a" * 52},
        {"ttl_seconds_after_finished": None},
        {"ttl_seconds_after_finished": 0},
        {"backoff_limit_per_index": 0, "max_failed_indexes": 10},
        {
            "resources": {
                "requests": {"cpu": "500m", "nvidia.com/gpu": 1},
                "limits": {"cpu": 1, "memory": "1Gi"},
            }
        },
        {"resources": {"claims": [{"name": "gpu"}]}},
        {"env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
        {"env": {"my.var-1": "x", "_X": ""}},
        {"labels": {"example.com/team": "genomics", "empty": ""}},
        {"job_template": template(completionMode="Indexed")},
    ],
)
def test_valid_edge_cases(overrides: dict[str, Any]) -> None:
    validate(spec(**overrides))


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
            "completionMode": "Indexed",
            "completions": 10,
            "parallelism": 10,
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
    assert "suspend" not in job_spec

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


# -- job_template merge ------------------------------------------------------------------------------


LIVE_JOB_TEMPLATE: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "old-name",
        "namespace": "other",
        "uid": "1234",
        "resourceVersion": "99",
        "labels": {"team": "genomics", QUEUE_NAME_LABEL: "old-queue"},
    },
    "spec": {
        "completions": 3,
        "parallelism": 3,
        "suspend": True,
        "backoffLimit": 20,
        "activeDeadlineSeconds": 7200,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "1234"}},
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "FailIndex",
                    "onExitCodes": {"containerName": "base", "operator": "In", "values": [42]},
                }
            ]
        },
        "template": {
            "metadata": {
                "labels": {
                    "batch.kubernetes.io/controller-uid": "1234",
                    "job-name": "old-name",
                    "tier": "batch",
                }
            },
            "spec": {
                "restartPolicy": "OnFailure",
                "priorityClassName": "batch-low",
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "base",
                        "image": "old:1",
                        "env": [{"name": "MODE", "value": "slow"}, {"name": "KEEP", "value": "1"}],
                        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    },
                    {"name": "log-shipper", "image": "fluent-bit:3"},
                ],
            },
        },
    },
    "status": {"succeeded": 3},
}


def test_job_template_merge_parameters_win() -> None:
    job = build_indexed_job(
        spec(job_template=LIVE_JOB_TEMPLATE, env={"MODE": "fast"}, spot=True, backoff_limit_per_index=1)
    )
    assert job["metadata"]["name"] == "align-shards-1a2b3c4d5e"
    assert job["metadata"]["namespace"] == "analytics"
    assert "uid" not in job["metadata"] and "resourceVersion" not in job["metadata"]
    assert job["metadata"]["labels"]["team"] == "genomics"
    assert job["metadata"]["labels"][QUEUE_NAME_LABEL] == "analytics-queue"
    assert "status" not in job

    job_spec = job["spec"]
    assert (job_spec["completions"], job_spec["parallelism"]) == (10, 10)
    assert job_spec["completionMode"] == "Indexed"
    assert job_spec["backoffLimit"] == 20
    assert job_spec["activeDeadlineSeconds"] == 7200
    assert "suspend" not in job_spec
    assert "selector" not in job_spec
    rules = job_spec["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "Ignore"
    assert rules[1]["action"] == "FailIndex"

    pod = job_spec["template"]
    assert pod["metadata"]["labels"]["tier"] == "batch"
    assert "batch.kubernetes.io/controller-uid" not in pod["metadata"]["labels"]
    assert "job-name" not in pod["metadata"]["labels"]
    pod_spec = pod["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    assert pod_spec["priorityClassName"] == "batch-low"
    assert pod_spec["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert [t["key"] for t in pod_spec["tolerations"]] == [
        "dedicated",
        "kubernetes.azure.com/scalesetpriority",
    ]
    main, sidecar = pod_spec["containers"]
    assert main["name"] == "base"  # kept: the template's podFailurePolicy refers to it
    assert main["image"] == "ghcr.io/example/aligner:1.4"
    assert main["volumeMounts"] == [{"name": "scratch", "mountPath": "/scratch"}]
    assert main["env"] == [{"name": "KEEP", "value": "1"}, {"name": "MODE", "value": "fast"}]
    assert sidecar == {"name": "log-shipper", "image": "fluent-bit:3"}
    assert LIVE_JOB_TEMPLATE["spec"]["suspend"] is True  # the template itself is not modified


def test_job_template_container_named_main_is_targeted() -> None:
    base = template(
        template={
            "spec": {"containers": [{"name": "sidecar", "image": "s:1"}, {"name": "main", "image": "x"}]}
        }
    )
    containers = build_indexed_job(spec(job_template=base))["spec"]["template"]["spec"]["containers"]
    assert containers == [
        {"name": "sidecar", "image": "s:1"},
        {"name": "main", "image": "ghcr.io/example/aligner:1.4"},
    ]


def test_job_template_without_containers() -> None:
    job = build_indexed_job(spec(job_template=template(backoffLimit=0)))
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["template"]["spec"]["containers"][0]["name"] == "main"


# -- names and label values --------------------------------------------------------------------------


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
