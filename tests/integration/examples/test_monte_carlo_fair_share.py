"""The Monte Carlo fair-share example, scaled down on the local cluster: borrowing, then preemption.

The test builds its own copy of ``example_dags/manifests/monte-carlo-queues.yaml`` with unique names and small
quotas (two ClusterQueues of 4 CPU in one cohort), then runs ``example_dags/monte_carlo_fair_share.py``:

- its research batch (4 shards x 2 CPU, low priority) needs 8 CPU: Kueue admits it by borrowing the idle risk
  queue's 4 CPU;
- while it runs, the DAG's risk VaR task (2 shards x 2 CPU, high priority) starts from a second run, and Kueue
  reclaims the lent quota by preempting the research Workload;
- the research task keeps waiting, is requeued and re-admitted, and succeeds with ``evictions`` >= 1.

``airflow dags test`` runs a DAG's tasks one after the other, so the two tasks cannot overlap in one run. The
DAG therefore runs in the background, and the risk task runs alone (``dag.partial_subset``) in a second
process once the research Job is running.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

from ..airflow_runner import AirflowHome, BackgroundDagRun
from ..cluster import SPOT_TOLERATION, Cluster, condition, is_true, short_id, wait_for

EXAMPLES = Path(__file__).resolve().parents[3] / "example_dags"
DAG_ID = "monte_carlo_fair_share"
NOMINAL_CPU = "4"
RESEARCH_PRIORITY, RISK_PRIORITY = 100, 10000

# The DAG's risk task alone, as a second DagRun of the same DAG (a fresh logical date, so its own run id).
RISK_TASK_ONLY = """
import runpy, sys
from airflow.sdk import DAG
dag = next(v for v in runpy.run_path({path!r}).values() if isinstance(v, DAG) and v.dag_id == {dag_id!r})
run = dag.partial_subset(["risk_var_run"], include_upstream=False, include_downstream=False).test()
print("dag run state=" + str(run.state))
sys.exit(0 if str(run.state).endswith("success") else 1)
"""


@dataclass
class FairShareQueues:
    """The test's copy of monte-carlo-queues.yaml: two ClusterQueues, each in its team's cohort, both under
    the department's."""

    cluster: Cluster
    cohort: str
    """The department's Cohort; the teams' are ``<cohort>-risk`` and ``<cohort>-research``."""
    flavor: str
    risk_namespace: str
    research_namespace: str
    risk_cq: str
    research_cq: str
    risk_priority: str
    research_priority: str
    risk_queue: str = "risk-queue"
    research_queue: str = "research-queue"

    def cq_usage(self, cq: str, resource: str = "cpu") -> tuple[Decimal, Decimal]:
        """(total, borrowed) of ``resource`` in ``cq``'s status, for this test's flavor."""
        status = self.cluster.kueue_get("clusterqueues", cq).get("status", {})
        for flavor in status.get("flavorsUsage") or []:
            if flavor["name"] != self.flavor:
                continue
            for res in flavor.get("resources") or []:
                if res["name"] == resource:
                    return parse_quantity(res.get("total", "0")), parse_quantity(res.get("borrowed", "0"))
        return Decimal(0), Decimal(0)

    def jobs(self, namespace: str) -> dict[str, dict[str, Any]]:
        jobs = self.cluster.batch.list_namespaced_job(namespace).items
        return {j.metadata.name: self.cluster.api.sanitize_for_serialization(j) for j in jobs}

    def new_job(self, namespace: str, seen: Collection[str] = ()) -> dict[str, Any] | None:
        """The one Job in ``namespace`` not in ``seen`` (None while there is none)."""
        new = [job for name, job in self.jobs(namespace).items() if name not in seen]
        assert len(new) <= 1, [j["metadata"]["name"] for j in new]
        return new[0] if new else None

    def workload(self, namespace: str, job: dict[str, Any]) -> dict[str, Any] | None:
        return self.cluster.workload_for_job(namespace, job["metadata"]["uid"])

    def workload_when(self, namespace: str, job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
        """The Job's Workload once its condition ``ctype`` is True."""
        wl = self.workload(namespace, job)
        return wl if is_true(wl, ctype) else None

    def borrowing(self, cq: str) -> tuple[Decimal, Decimal] | None:
        """(total, borrowed) CPU of ``cq`` once it borrows from the cohort."""
        total, borrowed = self.cq_usage(cq)
        return (total, borrowed) if borrowed > 0 else None


def _active_local_queue(cluster: Cluster, namespace: str, name: str) -> bool:
    return is_true(cluster.kueue_get("localqueues", name, namespace), "Active")


def _cluster_queue(name: str, cohort: str, flavor: str, namespace: str) -> dict[str, Any]:
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "preemption": {
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": RESEARCH_PRIORITY},
            },
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": NOMINAL_CPU, "borrowingLimit": NOMINAL_CPU},
                                {"name": "memory", "nominalQuota": "16Gi", "borrowingLimit": "16Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
    }


@pytest.fixture
def queues(cluster: Cluster) -> Iterator[FairShareQueues]:
    sid = short_id()
    q = FairShareQueues(
        cluster=cluster,
        cohort=f"quant-dept-{sid}",
        flavor=f"rf-mc-{sid}",
        risk_namespace=f"t-mc-risk-{sid}",
        research_namespace=f"t-mc-research-{sid}",
        risk_cq=f"cq-mc-risk-{sid}",
        research_cq=f"cq-mc-research-{sid}",
        risk_priority=f"risk-critical-{sid}",
        research_priority=f"research-batch-{sid}",
    )
    try:
        for ns in (q.risk_namespace, q.research_namespace):
            cluster.core.create_namespace({"metadata": {"name": ns, "labels": {"devcluster/test": "true"}}})
        cluster.kueue_create(
            "resourceflavors",
            {
                "kind": "ResourceFlavor",
                "metadata": {"name": q.flavor},
                "spec": {"nodeLabels": {"tier": "spot"}, "tolerations": [SPOT_TOLERATION]},
            },
        )
        for name, value in ((q.risk_priority, RISK_PRIORITY), (q.research_priority, RESEARCH_PRIORITY)):
            cluster.kueue_create(
                "workloadpriorityclasses",
                {"kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value},
            )
        cluster.kueue_create("cohorts", {"kind": "Cohort", "metadata": {"name": q.cohort}, "spec": {}})
        for team in ("risk", "research"):
            cluster.kueue_create(
                "cohorts",
                {
                    "kind": "Cohort",
                    "metadata": {"name": f"{q.cohort}-{team}"},
                    "spec": {"parentName": q.cohort},
                },
            )
        for cq, ns, lq, team in (
            (q.risk_cq, q.risk_namespace, q.risk_queue, "risk"),
            (q.research_cq, q.research_namespace, q.research_queue, "research"),
        ):
            cluster.kueue_create("clusterqueues", _cluster_queue(cq, f"{q.cohort}-{team}", q.flavor, ns))
            cluster.kueue_create(
                "localqueues",
                {
                    "kind": "LocalQueue",
                    "metadata": {"name": lq, "namespace": ns},
                    "spec": {"clusterQueue": cq},
                },
                namespace=ns,
            )
        for ns, lq in ((q.risk_namespace, q.risk_queue), (q.research_namespace, q.research_queue)):
            wait_for(
                f"LocalQueue {lq} in {ns} active",
                partial(_active_local_queue, cluster, ns, lq),
                timeout=30,
            )
        yield q
    finally:
        for ns in (q.risk_namespace, q.research_namespace):
            try:
                cluster.core.delete_namespace(ns, propagation_policy="Background")
            except ApiException as exc:
                if exc.status != 404:
                    raise
        for cq in (q.risk_cq, q.research_cq):
            cluster.kueue_delete("clusterqueues", cq)
        for cohort in (f"{q.cohort}-risk", f"{q.cohort}-research", q.cohort):
            cluster.kueue_delete("cohorts", cohort)
        cluster.kueue_delete("resourceflavors", q.flavor)
        for pc in (q.risk_priority, q.research_priority):
            cluster.kueue_delete("workloadpriorityclasses", pc)


def task_results(output: str) -> dict[str, dict[str, Any]]:
    """The operators' return values in a run's output ("...; result: {json} ["), by namespace."""
    results = [json.loads(m) for m in re.findall(r"; result: (\{.*?\}) \[", output)]
    return {r["namespace"]: r for r in results}


def start_risk_task_only(airflow_home: AirflowHome, extra_env: dict[str, str]) -> BackgroundDagRun:
    script = RISK_TASK_ONLY.format(path=str(airflow_home.home / "dags" / f"{DAG_ID}.py"), dag_id=DAG_ID)
    log = open(airflow_home.home / f"{DAG_ID}-risk-only.log", "w+")  # noqa: SIM115 - closed by wait()
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env={**airflow_home.env, **extra_env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return BackgroundDagRun(proc, log)


def test_monte_carlo_dag_imports_cleanly(airflow_home: AirflowHome, tmp_path: Path) -> None:
    (tmp_path / "dags").mkdir()
    shutil.copy(EXAMPLES / f"{DAG_ID}.py", tmp_path / "dags" / f"{DAG_ID}.py")
    run = airflow_home.airflow(
        "dags",
        "list-import-errors",
        "--output",
        "json",
        extra_env={"AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags")},
    )
    assert json.loads(run.output.strip().splitlines()[-1] or "[]") == [], run.output

    dag = runpy.run_path(str(EXAMPLES / f"{DAG_ID}.py"))["dag"]
    research, risk = dag.task_dict["research_batch"], dag.task_dict["risk_var_run"]
    assert dag.task_dict["report"].upstream_task_ids == {"research_batch", "risk_var_run"}
    assert not research.upstream_task_ids and not risk.upstream_task_ids, "the two runs are parallel"
    assert (research.namespace, research.queue_name, research.priority_class) == (
        "research",
        "research-queue",
        "research-batch",
    )
    assert (risk.namespace, risk.queue_name, risk.priority_class) == ("risk", "risk-queue", "risk-critical")
    manifest = (EXAMPLES / "manifests" / "monte-carlo-queues.yaml").read_text()
    for name in (
        "risk-cq",
        "research-cq",
        "cohortName: risk-team",
        "parentName: quant-dept",
        "risk-critical",
    ):
        assert name in manifest


def test_research_borrows_then_risk_reclaims_by_preemption(
    queues: FairShareQueues, airflow_home: AirflowHome
) -> None:
    shutil.copy(EXAMPLES / f"{DAG_ID}.py", airflow_home.home / "dags" / f"{DAG_ID}.py")
    airflow_home.env.update(
        {
            "MC_RESEARCH_SHARDS": "4",  # 4 x 2 CPU = 8 CPU: its own 4 plus 4 borrowed from risk
            "MC_RESEARCH_PARALLELISM": "4",
            "MC_RISK_SHARDS": "2",  # 2 x 2 CPU = 4 CPU: exactly risk's nominal quota
            "MC_RISK_PARALLELISM": "2",
            "MC_SHARD_CPU": "2",
            "MC_SHARD_MEMORY": "1Gi",
            "MC_RESEARCH_RUN_DURATION": "1s",
            "MC_RESEARCH_HOLD": "true",  # research shards run until the test releases them
            "MC_RISK_RUN_DURATION": "3s",
            "MC_RESEARCH_NAMESPACE": queues.research_namespace,
            "MC_RESEARCH_QUEUE": queues.research_queue,
            "MC_RESEARCH_PRIORITY": queues.research_priority,
            "MC_RISK_NAMESPACE": queues.risk_namespace,
            "MC_RISK_QUEUE": queues.risk_queue,
            "MC_RISK_PRIORITY": queues.risk_priority,
        }
    )
    research_ns, risk_ns = queues.research_namespace, queues.risk_namespace

    dag_run = airflow_home.start_dag(DAG_ID)
    risk_only: BackgroundDagRun | None = None
    try:
        # (a) Borrowing: the research Job is admitted with 8 CPU against a nominal quota of 4.
        research_job = wait_for("the research Job", lambda: queues.new_job(research_ns), timeout=120)
        research_wl = wait_for(
            "research Workload admitted",
            lambda: queues.workload_when(research_ns, research_job, "Admitted"),
            timeout=60,
        )
        admission = research_wl["status"]["admission"]
        assert admission["clusterQueue"] == queues.research_cq
        admitted_cpu = parse_quantity(admission["podSetAssignments"][0]["resourceUsage"]["cpu"])
        assert admitted_cpu == 8 > parse_quantity(NOMINAL_CPU), admission
        total, borrowed = wait_for("research-cq borrowing", lambda: queues.borrowing(queues.research_cq))
        assert (total, borrowed) == (Decimal(8), Decimal(4)), (total, borrowed)
        wait_for(
            "research pods running",
            lambda: any(
                p["status"].get("phase") == "Running"
                for p in queues.cluster.pods_of(research_ns, research_job["metadata"]["name"])
            ),
            timeout=60,
        )

        # (b) Reclaim: the DAG's risk task, in a run of its own, takes its nominal quota back.
        # The DAG run's own risk task may have run already (dags test picks the order of parallel tasks).
        risk_jobs_before = set(queues.jobs(risk_ns))
        risk_only = start_risk_task_only(airflow_home, {"MC_RISK_HOLD": "true"})
        evicted_wl = wait_for(
            "research Workload evicted",
            lambda: queues.workload_when(research_ns, research_job, "Evicted"),
            timeout=120,
        )
        evicted, preempted = condition(evicted_wl, "Evicted"), condition(evicted_wl, "Preempted")
        assert evicted and evicted["reason"] == "Preempted", evicted
        assert preempted and preempted["reason"] in {
            "InCohortReclamation",
            "InCohortReclaimWhileBorrowing",
        }, preempted
        risk_job = wait_for("the risk Job", lambda: queues.new_job(risk_ns, risk_jobs_before), timeout=60)
        risk_wl = wait_for(
            "risk Workload admitted",
            lambda: queues.workload_when(risk_ns, risk_job, "Admitted"),
            timeout=60,
        )
        assert risk_wl["status"]["admission"]["clusterQueue"] == queues.risk_cq
        assert queues.cq_usage(queues.risk_cq)[1] == 0, "the risk run uses its own quota, no borrowing"

        # Both Jobs' shards run until released: risk holds the reclaimed quota until the research task has
        # logged its requeue, then each Job finishes.
        wait_for(
            "research requeue in the task log",
            lambda: f"requeued in {queues.research_queue}" in dag_run.output(),
            timeout=120,
        )
        queues.cluster.release_until_finished(risk_ns, risk_job["metadata"]["name"])
        risk_run = risk_only.wait(timeout=180)
        queues.cluster.release_until_finished(research_ns, research_job["metadata"]["name"])
        run = dag_run.wait(timeout=240)
    finally:
        dag_run.kill()
        if risk_only:
            risk_only.kill()

    assert risk_run.succeeded, risk_run.output[-6000:]
    assert run.succeeded, run.output[-6000:]

    # The research task waited through the preemption and finished every shard.
    results = task_results(run.output)
    research = results[research_ns]
    assert research["job_name"] == research_job["metadata"]["name"]
    assert research["evictions"] >= 1 and research["completed_indexes"] == "0-3", research
    assert research["cluster_queue"] == queues.research_cq
    requeue = f"requeued in {queues.research_queue} after eviction (Preempted: {preempted['reason']}"
    assert requeue in run.output, run.output[-6000:]  # names Kueue's preemption reason
    # The pressure run's risk task: admitted at once in its own queue, never evicted.
    pressure = task_results(risk_run.output)[risk_ns]
    assert pressure["job_name"] == risk_job["metadata"]["name"]
    assert pressure["evictions"] == 0 and pressure["completed_indexes"] == "0,1", pressure
    assert pressure["cluster_queue"] == queues.risk_cq
    # The DAG run's own risk task succeeded too, and the report shows both outcomes.
    assert results[risk_ns]["cluster_queue"] == queues.risk_cq and results[risk_ns]["failed"] == 0
    assert re.search(
        rf"research_batch: 4/4 shards in {queues.research_cq}, [1-9]\d* eviction\(s\)", run.output
    ), run.output[-6000:]
    assert f"risk_var_run: 2/2 shards in {queues.risk_cq}, 0 eviction(s)" in run.output

    # Kueue's own record of it on the research Workload.
    final_wl = queues.workload(research_ns, research_job)
    assert final_wl and is_true(final_wl, "Finished"), final_wl
    stats = final_wl["status"].get("schedulingStats", {}).get("evictions", [])
    assert any(e["reason"] == "Preempted" and e["count"] >= 1 for e in stats), stats
