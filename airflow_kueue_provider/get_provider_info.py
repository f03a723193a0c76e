"""Airflow provider metadata (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any

from . import __version__
from .hooks.blob_connection_form import provider_connection_type
from .hooks.kueue_options import OPTIONS


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-kueue-provider",
        "name": "Kueue",
        "description": (
            "Kueue-queued Kubernetes IndexedJobs with per-index results and Azure Blob checkpoints."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Kueue",
                "external-doc-url": "https://kueue.sigs.k8s.io/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Kueue",
                "python-modules": [
                    "airflow_kueue_provider.operators.indexed_job",
                    "airflow_kueue_provider.operators.jobset",
                    "airflow_kueue_provider.operators.checkpoint_sweep",
                    "airflow_kueue_provider.operators.finished_job_sweep",
                    "airflow_kueue_provider.operators.queue_setup",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": "Kueue",
                "python-modules": [
                    "airflow_kueue_provider.hooks.kueue_hook",
                    "airflow_kueue_provider.hooks.kueue_async_hook",
                    "airflow_kueue_provider.hooks.blob_store",
                    "airflow_kueue_provider.hooks.queue_setup_hook",
                ],
            }
        ],
        "connection-types": [provider_connection_type()],
        "sensors": [
            {
                "integration-name": "Kueue",
                "python-modules": ["airflow_kueue_provider.operators.kueue_job_sensor"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Kueue",
                "python-modules": [
                    "airflow_kueue_provider.triggers.kueue_job",
                    "airflow_kueue_provider.triggers.kueue_jobset",
                ],
            }
        ],
        "task-decorators": [
            {"name": "kueue", "class-name": "airflow_kueue_provider.decorators.kueue_task.kueue_task"}
        ],
        "extra-links": ["airflow_kueue_provider.operators.kueue_link.KueueJobLink"],
        "config": {
            "kueue": {"description": "The Kueue provider: UI and pod policy.", "options": _typed(_OPTIONS)}
        },
    }


def _option(description: str, default: str | None = "", example: str | None = None) -> dict[str, Any]:
    """An option's entry; ``_typed`` sets its type and default from ``kueue_options.OPTIONS``."""
    return {
        "description": description,
        "version_added": "0.1.0",
        "type": "string",
        "example": example,
        "default": default,
    }


def _typed(options: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each option with the type and default the provider parses it with (their one home:
    ``hooks.kueue_options.OPTIONS``), so what Airflow lists is what is enforced."""
    return {
        key: {**entry, "type": OPTIONS[key].type, "default": OPTIONS[key].default}
        for key, entry in options.items()
    }


_OPTIONS = {
    "identity_key": {
        **_option(
            "The key of the identity seal (docs/tenancy.md): names and seals of a task's Jobs only Airflow "
            "can compute. The same long random secret on every worker, triggerer and API server; empty: "
            "derived from [core] fernet_key, else [api_auth] jwt_secret, else [api] secret_key.",
            example="<a long random secret>",
        ),
        "sensitive": True,
    },
    "kubernetes_conn_id": _option(
        "The connection the API server's Kueue pages read the cluster with (read-only: deploy/rbac/ui.yaml).",
        "kubernetes_default",
    ),
    "default_queue_name": _option(
        "The LocalQueue of a task that sets no queue_name (read at execute on the worker, from the config "
        "file or the environment at exec: a DAG file cannot change it); the queue policy applies to it. "
        "Empty: queue_name is required.",
        example="team-queue",
    ),
    "default_namespace": _option(
        "The namespace of a task that sets no namespace (read at execute on the worker, as "
        "default_queue_name); before the kubernetes connection's namespace extra and 'default'.",
        example="genomics",
    ),
    "ui_namespaces": _option(
        "Comma-separated namespaces the Kueue pages look in; empty: every namespace.", example="genomics,risk"
    ),
    "ui_streams_per_user": _option(
        "Live Kueue page streams (task tabs, queue pages) one user may keep open per API server.", "10"
    ),
    "ui_streams_total": _option("Live Kueue page streams open at once per API server, all users.", "100"),
    "ui_reads_per_user": _option(
        "Kueue page reads (pages, task JSON, log tails) one user may have running at once per API server; "
        "beyond, 429 with Retry-After.",
        "8",
    ),
    "ui_reads_total": _option(
        "Kueue page reads running at once per API server, all users (the plugin's own reader threads).", "32"
    ),
    "watch_max_objects": _option(
        "The shared watch (triggerers, API servers): Jobs, Workloads or JobSets one namespace may make it "
        "hold, per kind; beyond, that namespace's deferred tasks fail naming this option (fix: a "
        "count/jobs.batch ResourceQuota per team namespace).",
        "10000",
    ),
    "watch_max_mib": _option(
        "The shared watch: MiB one namespace's objects may take in it, all kinds (their slimmed JSON); "
        "beyond, that namespace's deferred tasks fail naming this option.",
        "128",
    ),
    "allowed_namespaces": _option(
        "Pod policy: namespaces tasks may run Jobs in (comma-separated); empty: any.", example="genomics,risk"
    ),
    "allowed_service_accounts": _option(
        "Pod policy: service accounts a Job's pods may use (comma-separated, '*': any); empty: none. Read "
        "from the config file and the environment at exec, as every [kueue] option (docs/tenancy-policy.md).",
        example="genomics-sa",
    ),
    "allowed_local_queues": _option(
        "Pod policy: LocalQueues per namespace ('ns:q1 q2; ns2:*; *:shared'); empty: any.",
        example="genomics:gpu-lq cpu-lq; risk:*",
    ),
    "allowed_priority_classes": _option(
        "Pod policy: Kueue WorkloadPriorityClasses per namespace (priority_class, raise_priority; format as "
        "allowed_local_queues); empty: any.",
        example="genomics:batch-low batch-high",
    ),
    "allowed_pod_priority_classes": _option(
        "Pod policy: pod priorityClassName per namespace (format as allowed_local_queues; system-* never); "
        "empty: none.",
        example="genomics:batch-low",
    ),
    "allowed_runtime_classes": _option(
        "Pod policy: pod runtimeClassName values allowed (comma-separated); empty: none.", example="gvisor"
    ),
    "allow_privileged_pods": _option(
        "Pod policy: allow privileged containers and privilege escalation.", "False"
    ),
    "allow_host_namespaces": _option(
        "Pod policy: allow hostNetwork, hostPID, hostIPC and hostPort.", "False"
    ),
    "allow_host_path_volumes": _option("Pod policy: allow hostPath volumes.", "False"),
    "allowed_capabilities": _option(
        "Pod policy: Linux capabilities containers may add (comma-separated); empty: none.",
        example="NET_ADMIN",
    ),
    "allowed_volume_types": _option(
        "Pod policy: volume types allowed beyond the restricted profile's (configMap, csi, downwardAPI, "
        "emptyDir, ephemeral, persistentVolumeClaim, projected, secret), comma-separated; empty: none. "
        "hostPath: allow_host_path_volumes.",
        example="nfs",
    ),
    "allowed_secrets": _option(
        "Pod policy: Secrets a pod may name (volumes, env, envFrom, imagePullSecrets) per namespace, as "
        "allowed_local_queues ('name*' matches a prefix); empty: any.",
        example="genomics:genomics-*; risk:risk-db",
    ),
    "allowed_config_maps": _option(
        "Pod policy: ConfigMaps a pod may name per namespace (format as allowed_secrets); empty: any.",
        example="genomics:genomics-*",
    ),
    "allowed_persistent_volume_claims": _option(
        "Pod policy: PVCs a pod may mount per namespace (format as allowed_secrets); empty: any.",
        example="genomics:genomics-*",
    ),
}
