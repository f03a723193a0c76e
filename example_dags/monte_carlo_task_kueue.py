"""A Monte Carlo VaR run written as a Python function: ``@task.kueue`` runs ``price_paths`` once per shard
in the shard image, queued by Kueue, and returns each shard's estimate; ``aggregate`` reads them from the
result and updates the ``risk-var-taskflow`` Asset.

Settings are DAG ``params`` (change them when triggering); the queue and namespace are the fair-share
example's (``example_dags/manifests``). The shard image needs the worker package (docs/worker-package.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Asset, Param, task

from airflow_kueue_provider.operators.checkpointing import Checkpointing

with DAG(
    dag_id="monte_carlo_task_kueue",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    render_template_as_native_obj=True,  # the params reach the function as numbers, not text
    params={
        "shards": Param(100, type="integer", minimum=1, maximum=10_000),
        "paths_per_shard": Param(20_000, type="integer", minimum=1),
    },
    tags=["kueue", "monte-carlo", "taskflow"],
) as dag:

    @task.kueue(
        namespace="risk",
        queue_name="risk-batch",
        image="ghcr.io/example/airflow-kueue-shard:0.1.0",
        completions="{{ params.shards }}",
        parallelism=20,
        expected_shard_duration=5,
        spot=True,
        resources={"requests": {"cpu": "500m", "memory": "512Mi"}},
        checkpointing=Checkpointing(conn_id="kueue_blob_default"),
    )
    def price_paths(shard: Any, paths: int) -> float:
        import random

        rng = random.Random(shard.shard_id)  # a shard redone after an eviction draws the same paths
        losses = sorted(max(0.0, rng.gauss(0, 1)) for _ in range(paths))
        return losses[int(0.99 * (paths - 1))]  # this shard's 99% quantile of the loss

    @task(outlets=[Asset(name="risk-var-taskflow", uri="montecarlo://risk/var/taskflow")])
    def aggregate(priced: dict[str, Any]) -> float:
        values = list(priced["results"].values())
        return sum(values) / len(values)

    aggregate(price_paths(paths="{{ params.paths_per_shard }}"))
