"""No pod of a task ever runs outside Kueue's quota, whatever state Kueue is in (real DAG runs, real cluster).

- a LocalQueue in a namespace Kueue does not manage (kube-system): the Job stays suspended, no pod starts, and
  after ``workload_timeout`` the Job is deleted and the task fails naming Kueue;
- Kueue's job webhook configuration removed: the Job is still created suspended, Kueue's controller still
  makes its Workload, and its pods start only after admission;
- the Kueue controller stopped at submit time: the create is retried, then fails naming Kueue's webhook, and
  nothing is created.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.kueue.api_time import parse_api_time
from devcluster import procs
from devcluster.layout import Layout

from ..airflow_runner import AirflowHome
from ..cluster import Cluster, KueueEnv, condition, create_kueue_env, delete_kueue_env, short_id, wait_for
from .test_indexed_job_queueing import write_operator_dag

REPO = Path(__file__).resolve().parents[3]
JOB_WEBHOOK = "mjob.kb.io"
MUTATING_CONFIG = "kueue-mutating-webhook-configuration"


@pytest.fixture
def unmanaged_env(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[KueueEnv]:
    """A ClusterQueue and LocalQueue serving kube-system, a namespace Kueue's defaults leave out."""
    env = create_kueue_env(
        cluster, request.node.name, namespace="kube-system", local_queue=f"lq-{short_id()}"
    )
    yield env
    for job in env.jobs():
        if job.metadata.labels.get("app.kubernetes.io/managed-by") == "airflow-kueue-provider":
            cluster.batch.delete_namespaced_job(
                job.metadata.name, "kube-system", propagation_policy="Background"
            )
    delete_kueue_env(env)


def _our_pods(env: KueueEnv) -> list[Any]:
    pods = env.cluster.core.list_namespaced_pod(
        env.namespace, label_selector="app.kubernetes.io/managed-by=airflow-kueue-provider"
    )
    return [p for p in pods.items if p.metadata.labels.get("airflow-kueue.io/dag-id") == "unmanaged_ns"]


def test_a_namespace_kueue_does_not_manage_never_starts_a_pod_and_fails_naming_kueue(
    unmanaged_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    env = unmanaged_env
    # 20 s for Kueue to make the Workload (default 60: the same path, 40 s more of CI)
    write_operator_dag(
        airflow_home, "unmanaged_ns", env, completions=4, cpu="250m", extra="workload_timeout=20,"
    )
    background = airflow_home.start_dag("unmanaged_ns")
    pods_seen: list[str] = []
    try:
        job = wait_for("the Job", lambda: [j for j in env.jobs() if "unmanaged" in j.metadata.name], 240)[0]
        submitted = time.monotonic()
        assert job.spec.suspend is True, "created suspended"
        while background.proc.poll() is None and time.monotonic() - submitted < 150:
            pods_seen += [p.metadata.name for p in _our_pods(env)]
            time.sleep(0.5)
        run = background.wait(timeout=60)
        failed_after = time.monotonic() - submitted
    finally:
        background.kill()

    assert not run.succeeded, run.output[-4000:]
    assert pods_seen == [], "no pod of the Job ever started"
    assert failed_after < 90, f"the task failed {failed_after:.0f} s after the Job was created"
    assert re.search(
        r"Kueue did not create a Workload for Job kube-system/\S+ within workload_timeout=20s", run.output
    )
    assert "managedJobsNamespaceSelector" in run.output
    wait_for("the Job gone", lambda: not [j for j in env.jobs() if "unmanaged" in j.metadata.name], 60)


@pytest.mark.serial  # it takes Kueue's job webhook away from every other test
def test_without_kueues_job_webhook_the_job_still_runs_only_after_admission(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    admission = kueue_env.cluster.api
    from kubernetes import client

    api = client.AdmissionregistrationV1Api(admission)
    saved = api.read_mutating_webhook_configuration(MUTATING_CONFIG)
    api.patch_mutating_webhook_configuration(
        MUTATING_CONFIG,
        [
            {
                "op": "replace",
                "path": "/webhooks",
                "value": [
                    admission.sanitize_for_serialization(h) for h in saved.webhooks if h.name != JOB_WEBHOOK
                ],
            }
        ],
    )
    try:
        write_operator_dag(airflow_home, "no_webhook", kueue_env, completions=3, cpu="250m")
        run = airflow_home.test_dag("no_webhook")
    finally:
        api.patch_mutating_webhook_configuration(
            MUTATING_CONFIG,
            [
                {
                    "op": "replace",
                    "path": "/webhooks",
                    "value": admission.sanitize_for_serialization(saved.webhooks),
                }
            ],
        )

    assert run.succeeded, run.output[-4000:]
    (job,) = kueue_env.jobs()
    workload = kueue_env.workload(kueue_env.cluster.api.sanitize_for_serialization(job))
    admitted_at = parse_api_time(condition(workload, "Admitted")["lastTransitionTime"])
    pods = kueue_env.pods(job.metadata.name)
    assert pods, "the Job ran"
    assert all(parse_api_time(p["metadata"]["creationTimestamp"]) >= admitted_at for p in pods), (
        "every pod was created after Kueue admitted the Workload"
    )


@pytest.mark.serial  # it stops the Kueue controller
def test_kueue_down_at_submit_retries_then_fails_naming_kueue_and_creates_nothing(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    layout = Layout.default()
    write_operator_dag(airflow_home, "kueue_down", kueue_env, completions=2, cpu="250m")
    procs.stop(layout, "kueue")
    try:
        run = airflow_home.test_dag("kueue_down")
    finally:
        subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True, capture_output=True)

    assert not run.succeeded
    assert "Kueue's webhook must answer" in run.output, run.output[-4000:]
    assert "Nothing was created" in run.output
    assert (
        len(re.findall(r"create Job failed \(HTTP 500 .*failed calling webhook.*\); retrying in", run.output))
        >= 3
    )
    assert "HTTP response headers" not in run.output, "one line per retry, not the whole response"
    assert kueue_env.jobs() == []
    try:
        kueue_env.cluster.batch.list_namespaced_job(kueue_env.namespace)
    except ApiException as exc:  # pragma: no cover - only to show the API is back for the next test
        raise AssertionError(exc) from exc
