"""merge_job_template(): the built Job over a user's base Job."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.names import QUEUE_NAME_LABEL
from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job

from ..job_specs import spec, template

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
    assert job_spec["suspend"] is True, "the provider's suspend, whatever the template said"
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
