"""The finished-Job sweep on the real cluster: only the provider's finished Jobs go, with their Workloads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_kueue_provider.kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from airflow_kueue_provider.operators.finished_job_sweep import KueueFinishedJobSweepOperator

from ..cluster import KueueEnv, indexed_job, is_true, wait_for

MANAGED = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}


def _sweep(namespace: str, older_than: timedelta, dry_run: bool = False) -> dict[str, Any]:
    op = KueueFinishedJobSweepOperator(
        task_id="sweep", namespace=namespace, older_than=older_than, dry_run=dry_run
    )
    return op.execute({})  # type: ignore[arg-type]


def test_sweep_deletes_only_finished_provider_jobs_and_their_workloads(kueue_env: KueueEnv) -> None:
    queue = kueue_env.local_queue
    kueue_env.create_job(indexed_job("done", queue, completions=2, cpu="250m", labels=MANAGED))
    kueue_env.create_job(
        indexed_job(
            "failed",
            queue,
            completions=2,
            cpu="250m",
            labels=MANAGED,
            annotations={"kwok.airflow-kueue.io/fail-indexes": "1"},
            backoffLimitPerIndex=0,
        )
    )
    kueue_env.create_job(indexed_job("foreign", queue, completions=1, cpu="250m"))  # not ours
    kueue_env.create_job(
        indexed_job("running", queue, completions=1, cpu="250m", run_duration="10m", labels=MANAGED)
    )
    wait_for("done Complete", lambda: is_true(kueue_env.job("done"), "Complete"), timeout=90)
    wait_for("failed Failed", lambda: is_true(kueue_env.job("failed"), "Failed"), timeout=90)
    wait_for("foreign Complete", lambda: is_true(kueue_env.job("foreign"), "Complete"), timeout=90)
    wait_for(
        "running admitted",
        lambda: (j := kueue_env.job("running")) and (j["status"].get("active") or 0) > 0,
        timeout=90,
    )
    finished_uids = [kueue_env.job(name)["metadata"]["uid"] for name in ("done", "failed")]  # type: ignore[index]
    assert all(kueue_env.cluster.workload_for_job(kueue_env.namespace, uid) for uid in finished_uids)

    ns = kueue_env.namespace
    assert _sweep(ns, timedelta(days=1)) == {"jobs": [], "deleted": 0, "dry_run": False}
    listed = _sweep(ns, timedelta(0), dry_run=True)
    assert sorted(listed["jobs"]) == [f"{ns}/done", f"{ns}/failed"] and listed["deleted"] == 0
    assert kueue_env.job("done") is not None, "dry_run deletes nothing"

    swept = _sweep(ns, timedelta(0))
    assert sorted(swept["jobs"]) == [f"{ns}/done", f"{ns}/failed"] and swept["deleted"] == 2
    wait_for("finished Jobs gone", lambda: not kueue_env.job("done") and not kueue_env.job("failed"))
    wait_for(
        "their Workloads and pods garbage-collected",
        lambda: (
            not any(kueue_env.cluster.workload_for_job(ns, uid) for uid in finished_uids)
            and not kueue_env.pods("done")
            and not kueue_env.pods("failed")
        ),
        timeout=60,
    )
    assert kueue_env.job("foreign") is not None, "a Job the provider did not submit is never touched"
    running = kueue_env.job("running")
    assert running is not None and not is_true(running, "Complete"), "a running Job is never touched"
