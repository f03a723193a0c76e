"""The IndexedJobSpec the job_* unit tests start from."""

from __future__ import annotations

import dataclasses
from typing import Any

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec

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
