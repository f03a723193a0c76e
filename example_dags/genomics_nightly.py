"""Nightly genomics: align 1,000 chromosome shards on AKS Spot nodes through a Kueue queue.

Shard ``i`` reads ``chromosome_{i}.bam`` (``JOB_COMPLETION_INDEX`` -> shard id, which on a retry is the i-th
unfinished shard; the worker SDK resolves it). Shards checkpoint to Azure Blob Storage, a retry runs only the
shards that did not finish, and the downstream task reads the per-shard result from XCom.

The shard count and parallelism are DAG ``params`` (``shards``, ``parallelism``: change them when triggering a
run); the aligned shards are the ``genomics-nightly-alignments`` Asset, updated by every successful run.
Deployment settings (environment, so the same file runs nightly on AKS and in `make demo` on the local
cluster): GENOMICS_SHARDS and GENOMICS_PARALLELISM (the params' defaults: 1000, 50), GENOMICS_IMAGE,
GENOMICS_NAMESPACE (genomics),
GENOMICS_QUEUE (genomics-queue), GENOMICS_BLOB_CONN (kueue_blob_default), GENOMICS_BLOB_CONTAINER
(genomics-checkpoints), GENOMICS_RUN_DURATION (the local cluster's fake shard run time, e.g. "3s").
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, Param, task

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

SHARDS = int(os.environ.get("GENOMICS_SHARDS", "1000"))
PARALLELISM = int(os.environ.get("GENOMICS_PARALLELISM", "50"))
FAKE_RUN = os.environ.get("GENOMICS_RUN_DURATION", "")

with DAG(
    "genomics_nightly",
    schedule="0 1 * * *",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    params={
        "shards": Param(SHARDS, type="integer", minimum=1, maximum=100_000, description="chromosome shards"),
        "parallelism": Param(PARALLELISM, type="integer", minimum=1, description="shards aligned at once"),
    },
    tags=["kueue", "genomics", "spot"],
) as dag:
    align = KueueIndexedJobOperator(
        task_id="align_chromosome_shards",
        namespace=os.environ.get("GENOMICS_NAMESPACE", "genomics"),
        queue_name=os.environ.get("GENOMICS_QUEUE", "genomics-queue"),
        image=os.environ.get("GENOMICS_IMAGE", "myregistry.azurecr.io/genomics-shard:2026.11"),
        cmds=["python", "-m", "airflow_kueue_provider.worker.sample_shard"],
        arguments=[
            "--items",
            "200",
            "--checkpoint-every",
            "20",
            "--input-pattern",
            "chromosome_{shard}.bam",
            "--counter-file",
            "/tmp/processed-items.txt",
        ],
        env={"REFERENCE_GENOME": "GRCh38", "RUN_DATE": "{{ dag_run.run_after | ds }}"},
        completions="{{ params.shards }}",
        parallelism="{{ [params.parallelism, params.shards] | min }}",
        resources={"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        spot=True,
        backoff_limit_per_index=2,
        max_failed_indexes=max(1, SHARDS // 100),  # up to 1% of the default shards may fail for good
        checkpointing=Checkpointing(
            conn_id=os.environ.get("GENOMICS_BLOB_CONN", "kueue_blob_default"),
            container=os.environ.get("GENOMICS_BLOB_CONTAINER", "genomics-checkpoints"),
            workload_identity_service_account=os.environ.get("GENOMICS_SERVICE_ACCOUNT") or None,
        ),
        annotations={"kwok.airflow-kueue.io/run-duration": FAKE_RUN} if FAKE_RUN else None,
        outlets=[Asset(name="genomics-nightly-alignments", uri="genomics://nightly/alignments")],
    )

    @task
    def publish_variant_calls(result: dict[str, Any]) -> dict[str, Any]:
        """Downstream: use only the shards that finished; list the ones to look at tomorrow."""
        done, failed = result["completed_indexes"], result["failed_indexes"]
        summary = f"{result['succeeded']}/{result['completions']} chromosome shards aligned ({done})"
        print(f"{summary}; failed: {failed or 'none'}")
        return {"inputs": [f"chromosome_{s}.bam" for s in list(IndexSet.parse(done))[:5]], "failed": failed}

    publish_variant_calls(align.output)
