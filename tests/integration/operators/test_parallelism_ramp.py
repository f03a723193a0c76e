"""Parallelism ramp-up on the real cluster: the Job's parallelism steps up while it runs (Kueue slices)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from airflow_kueue_provider.kueue.spec.parallelism_ramp import ParallelismRamp
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import HOLD, KueueEnv, wait_for


def test_parallelism_steps_up_to_the_target_while_the_job_runs(kueue_env: KueueEnv) -> None:
    op = KueueIndexedJobOperator(
        task_id="ramped",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        image="example.invalid/shard:1",
        completions=24,
        parallelism=6,
        deferrable=False,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "1s", **HOLD},  # pods run until released
        parallelism_ramp=ParallelismRamp(start=2, step=2, every_seconds=3),
    )
    ti = SimpleNamespace(dag_id="ramp", task_id="ramped", run_id="r1", try_number=1, map_index=-1)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = op.execute({"ti": ti})  # type: ignore[arg-type]
        except Exception as exc:  # surfaced by the assertions below
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    job = wait_for("the Job", lambda: kueue_env.cluster.batch.list_namespaced_job(kueue_env.namespace).items)[
        0
    ]
    assert job.metadata.annotations["kueue.x-k8s.io/elastic-job"] == "true"
    seen: list[int] = []
    workloads: set[str] = set()
    while worker.is_alive():
        current = kueue_env.job(job.metadata.name)
        if current and (not seen or seen[-1] != current["spec"]["parallelism"]):
            seen.append(current["spec"]["parallelism"])
        workloads |= {
            w["metadata"]["name"]
            for w in kueue_env.cluster.custom.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", kueue_env.namespace, "workloads"
            )["items"]
        }
        if seen[-1:] == [6]:  # the ramp reached its target while the first pods still ran: let them finish
            kueue_env.release(job.metadata.name)
        time.sleep(0.2)
    worker.join()

    assert "error" not in outcome, outcome.get("error")
    assert seen == [2, 4, 6], seen
    assert len(workloads) >= 2, "each raise was admitted as a new Workload slice"
    assert outcome["result"]["completed_indexes"] == "0-23"
