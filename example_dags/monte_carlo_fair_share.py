"""Monte Carlo fair share: a research batch borrows the risk desk's idle quota and gives it back on demand.

Two teams share one AKS Spot pool through a Kueue cohort (``monte-carlo``): ``risk-cq`` and ``research-cq``
each own 80 vCPU and may borrow the other's idle quota. Every four hours this DAG starts, in parallel:

- ``research_batch``: a large, low-priority (``research-batch``) Monte Carlo batch in ``research-queue``.
  It asks for more than its own 80 vCPU, so Kueue admits it by borrowing the risk queue's idle quota.
- ``risk_var_run``: the risk desk's VaR simulation, high priority (``risk-critical``), in ``risk-queue``.
  It fits in risk's own quota, so when that quota is lent out Kueue reclaims it by preempting the research
  batch (Workload condition ``Preempted``, reason ``InCohortReclamation``). The research Job is suspended and
  requeued, and resumes when the quota is free again. Its task keeps waiting: a preemption is not a failure
  and shows up as ``evictions`` in the task's result.

``report`` then prints both outcomes (shards, ClusterQueue, queue wait, evictions).

The preemption needs the two tasks to overlap: ``airflow dags test`` runs one task after the other, so there
it never happens. ``make demo-fair-share`` runs this DAG's scheduled run on a real Airflow deployment
(scheduler, triggerer, API server), holding the risk LocalQueue until the research batch runs, and prints the
eviction and both results; ``tests/integration/examples/test_monte_carlo_fair_share.py`` runs the risk task in
a second process instead.

Set up the queues once (namespaces, Spot ResourceFlavor, the two ClusterQueues in their cohort, the
LocalQueues and the two WorkloadPriorityClasses)::

    kubectl apply --server-side -f example_dags/manifests/monte-carlo-queues.yaml

The same command works on the local cluster (``make cluster-up``) with its own kubectl, in the directory
that ``bash devcluster/build.sh`` prints, after ``source .devcluster/env`` (which sets KUBECONFIG).

The shard counts, parallelism and paths are DAG ``params`` (``research_shards``, ``research_parallelism``,
``research_paths``, ``risk_shards``, ``risk_parallelism``, ``risk_paths``: change them when triggering a run).
Each task updates an Asset when it succeeds (``monte-carlo-research-estimates``, ``risk-var-global-rates``),
so a downstream DAG can be scheduled on them.

Deployment settings (environment, so the same file runs on AKS and on the local cluster):
MC_RESEARCH_SHARDS (the params' defaults: 400) and MC_RESEARCH_PARALLELISM (40), MC_RISK_SHARDS (20) and
MC_RISK_PARALLELISM (20), MC_SHARD_CPU (4) and MC_SHARD_MEMORY (16Gi) per shard, MC_RESEARCH_PATHS
(paths per research shard, 1000000), MC_RISK_PATHS (200000), MC_IMAGE, MC_RESEARCH_NAMESPACE (research),
MC_RESEARCH_QUEUE (research-queue), MC_RESEARCH_PRIORITY (research-batch), MC_RISK_NAMESPACE (risk),
MC_RISK_QUEUE (risk-queue), MC_RISK_PRIORITY (risk-critical); MC_RUN_DURATION is the local cluster's fake
shard run time (e.g. "20s"), MC_RESEARCH_RUN_DURATION / MC_RISK_RUN_DURATION set it per task, and
MC_RESEARCH_HOLD / MC_RISK_HOLD=true keep a task's fake shards Running until a test releases them.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, Param, task

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

IMAGE = os.environ.get("MC_IMAGE", "myregistry.azurecr.io/monte-carlo:2026.11")
SHARD_RESOURCES = {
    "requests": {
        "cpu": os.environ.get("MC_SHARD_CPU", "4"),
        "memory": os.environ.get("MC_SHARD_MEMORY", "16Gi"),
    },
    "limits": {"memory": os.environ.get("MC_SHARD_MEMORY", "16Gi")},
}
RESEARCH_SHARDS = int(os.environ.get("MC_RESEARCH_SHARDS", "400"))
RISK_SHARDS = int(os.environ.get("MC_RISK_SHARDS", "20"))
RESEARCH_MAX_FAILED = max(1, RESEARCH_SHARDS // 50)  # a few lost seeds do not spoil the estimate
RESEARCH_ESTIMATES = Asset(name="monte-carlo-research-estimates", uri="montecarlo://research/estimates")
RISK_VAR = Asset(name="risk-var-global-rates", uri="montecarlo://risk/var/global-rates")
FAKE_RUN = os.environ.get("MC_RUN_DURATION", "")


def fake_run(task: str) -> dict[str, str] | None:
    """On the local cluster, the pod annotations that say how long each fake shard runs
    (MC_<TASK>_RUN_DURATION) and whether it stays Running until released (MC_<TASK>_HOLD=true, for tests)."""
    annotations = {}
    if duration := os.environ.get(f"MC_{task}_RUN_DURATION", FAKE_RUN):
        annotations["kwok.airflow-kueue.io/run-duration"] = duration
    if os.environ.get(f"MC_{task}_HOLD") == "true":
        annotations["kwok.airflow-kueue.io/hold"] = "true"
    return annotations or None


with DAG(
    "monte_carlo_fair_share",
    schedule="0 */4 * * *",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["kueue", "monte-carlo", "spot", "cohort"],
    params={
        "research_shards": Param(  # at least the seeds it may lose (max_failed_indexes)
            RESEARCH_SHARDS, type="integer", minimum=RESEARCH_MAX_FAILED, maximum=100_000, description="seeds"
        ),
        "research_parallelism": Param(
            int(os.environ.get("MC_RESEARCH_PARALLELISM", "40")), type="integer", minimum=1
        ),
        "research_paths": Param(
            int(os.environ.get("MC_RESEARCH_PATHS", "1000000")), type="integer", minimum=1
        ),
        "risk_shards": Param(
            RISK_SHARDS, type="integer", minimum=1, maximum=100_000, description="scenarios"
        ),
        "risk_parallelism": Param(
            int(os.environ.get("MC_RISK_PARALLELISM", "20")), type="integer", minimum=1
        ),
        "risk_paths": Param(int(os.environ.get("MC_RISK_PATHS", "200000")), type="integer", minimum=1),
    },
) as dag:
    research = KueueIndexedJobOperator(
        task_id="research_batch",
        namespace=os.environ.get("MC_RESEARCH_NAMESPACE", "research"),
        queue_name=os.environ.get("MC_RESEARCH_QUEUE", "research-queue"),
        priority_class=os.environ.get("MC_RESEARCH_PRIORITY", "research-batch"),
        image=IMAGE,
        cmds=["python", "-m", "montecarlo.simulate"],
        arguments=[
            "--model",
            "rough-heston",
            "--paths",
            "{{ params.research_paths }}",
            "--seed",
            "$(JOB_COMPLETION_INDEX)",
        ],
        env={"RUN_ID": "{{ run_id }}"},
        completions="{{ params.research_shards }}",
        parallelism="{{ [params.research_parallelism, params.research_shards] | min }}",
        resources=SHARD_RESOURCES,
        spot=True,
        backoff_limit_per_index=2,
        max_failed_indexes=RESEARCH_MAX_FAILED,
        annotations=fake_run("RESEARCH"),
        outlets=[RESEARCH_ESTIMATES],
    )

    risk = KueueIndexedJobOperator(
        task_id="risk_var_run",
        namespace=os.environ.get("MC_RISK_NAMESPACE", "risk"),
        queue_name=os.environ.get("MC_RISK_QUEUE", "risk-queue"),
        priority_class=os.environ.get("MC_RISK_PRIORITY", "risk-critical"),
        image=IMAGE,
        cmds=["python", "-m", "montecarlo.var"],
        arguments=[
            "--portfolio",
            "global-rates",
            "--paths",
            "{{ params.risk_paths }}",
            "--confidence",
            "0.99",
            "--seed",
            "$(JOB_COMPLETION_INDEX)",
        ],
        env={"RUN_ID": "{{ run_id }}", "VALUATION_DATE": "{{ dag_run.run_after | ds }}"},
        completions="{{ params.risk_shards }}",
        parallelism="{{ [params.risk_parallelism, params.risk_shards] | min }}",
        resources=SHARD_RESOURCES,
        spot=True,
        backoff_limit_per_index=3,
        max_failed_indexes=0,  # VaR needs every scenario
        queue_timeout=timedelta(minutes=30),  # the numbers are due before the desk opens
        annotations=fake_run("RISK"),
        outlets=[RISK_VAR],
    )

    @task
    def report(research_result: dict[str, Any], risk_result: dict[str, Any]) -> dict[str, Any]:
        """Downstream: one line per run, with the ClusterQueue that admitted it and its evictions."""
        summary = {}
        for name, result in (("research_batch", research_result), ("risk_var_run", risk_result)):
            summary[name] = {
                key: result[key]
                for key in ("cluster_queue", "succeeded", "completions", "evictions", "queued_seconds")
            }
            print(
                f"{name}: {result['succeeded']}/{result['completions']} shards in {result['cluster_queue']}, "
                f"{result['evictions']} eviction(s), queued {result['queued_seconds'] or 0:.0f} s"
            )
        return summary

    report(research.output, risk.output)
