"""Airflow provider metadata (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any

from . import __version__


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
                    "airflow_kueue_provider.operators.sweep",
                    "airflow_kueue_provider.operators.job_sweep",
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
                ],
            }
        ],
        "triggers": [
            {"integration-name": "Kueue", "python-modules": ["airflow_kueue_provider.triggers.kueue_job"]}
        ],
    }
