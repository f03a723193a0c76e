"""Per-DAG authorization of the Kueue pages in a real ``airflow api-server``.

The API server runs with an auth manager that lets alice read DAG ``a`` only, and its Kueue pages read the
cluster through a loopback proxy that counts connections: a refused page makes no Kubernetes request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devcluster.layout import PORTS

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, wait_for
from ..tcp_proxy import FreezableProxy, kubeconfig_through
from .test_api_server import start_api_server

AUTH_MANAGER = '''
"""Test-only: SimpleAuthManager, except that a user reads only the DAGs KUEUE_TEST_DAG_GRANTS grants."""
import json
import os

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

GRANTS = json.loads(os.environ["KUEUE_TEST_DAG_GRANTS"])


class DagScopedAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None):
        if details is None or details.id not in GRANTS.get(user.get_name(), []):
            return False
        return super().is_authorized_dag(
            method=method, user=user, access_entity=access_entity, details=details
        )
'''


def scoped_env(tmp_path: Path, kubeconfig: Path) -> dict[str, str]:
    """The API server's environment: the auth manager of ``tmp_path``, alice's grants, the UI's cluster
    connection through ``kubeconfig`` (the counting proxy's)."""
    return {
        "PYTHONPATH": str(tmp_path),
        "AIRFLOW__CORE__AUTH_MANAGER": "dag_scoped_auth.DagScopedAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "alice:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "passwords.json"),
        "KUEUE_TEST_DAG_GRANTS": json.dumps({"alice": ["a", "kueue_plot_a", "kueue_nights_a"]}),
        "AIRFLOW__KUEUE__KUBERNETES_CONN_ID": "kueue_ui_via_proxy",
        "AIRFLOW_CONN_KUEUE_UI_VIA_PROXY": json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        ),
    }


@pytest.fixture
def scoped_api_server(
    airflow_home: AirflowHome, kueue_env: KueueEnv, devcluster_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[str, FreezableProxy, dict[str, str]]]:
    (tmp_path / "dag_scoped_auth.py").write_text(AUTH_MANAGER)
    passwords = tmp_path / "passwords.json"
    with FreezableProxy("127.0.0.1", PORTS.apiserver).running() as proxy:
        kubeconfig = kubeconfig_through(
            proxy, Path(devcluster_env["KUBECONFIG"]), PORTS.apiserver, tmp_path / "ui-kubeconfig"
        )
        with start_api_server(airflow_home, kueue_env, scoped_env(tmp_path, kubeconfig)) as url:
            wait_for("the passwords file", passwords.exists, timeout=30)
            yield url, proxy, json.loads(passwords.read_text())


def test_a_user_reads_the_kueue_tab_of_her_dag_and_gets_403_without_a_cluster_request_for_another(
    scoped_api_server: tuple[str, FreezableProxy, dict[str, str]],
) -> None:
    url, proxy, passwords = scoped_api_server
    token = httpx.post(
        f"{url}/auth/token", json={"username": "alice", "password": passwords["alice"]}, timeout=10
    ).json()["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    task = {"run_id": "r", "task_id": "t", "map_index": "{MAP_INDEX}"}

    for path in ("/kueue/task", "/kueue/api/task"):
        refused = httpx.get(f"{url}{path}", params={**task, "dag_id": "b"}, headers=bearer, timeout=30)
        assert refused.status_code == 403, refused.text
    assert proxy.connections == 0, "no Kubernetes request was made for the refused pages"

    allowed = httpx.get(f"{url}/kueue/task", params={**task, "dag_id": "a"}, headers=bearer, timeout=30)
    assert allowed.status_code == 200 and "has no Kueue Job" in allowed.text, allowed.text[-2000:]
    assert proxy.connections > 0, "the allowed page read the cluster"
    api = httpx.get(f"{url}/kueue/api/task", params={**task, "dag_id": "a"}, headers=bearer, timeout=30)
    assert api.status_code == 200 and api.json() == {"jobs": []}


PLOTTED_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions=2, resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        annotations={{"kwok.airflow-kueue.io/run-duration": "1s"}},
    )
"""
RUN_AFTER = "2026-12-01T02:00:00+00:00"


def test_the_kueue_plots_show_a_user_the_runs_of_her_dags_only(
    scoped_api_server: tuple[str, FreezableProxy, dict[str, str]],
    airflow_home: AirflowHome,
    kueue_env: KueueEnv,
) -> None:
    """Two DAGs ran on the same queue; alice may read kueue_plot_a only. Neither the queue page's plots (and
    JSON) nor any task view shows her a run of kueue_plot_b, whose task view refuses her."""
    url, _, passwords = scoped_api_server
    for dag_id in ("kueue_plot_a", "kueue_plot_b"):
        airflow_home.write_dag(
            dag_id,
            PLOTTED_DAG.format(dag_id=dag_id, namespace=kueue_env.namespace, queue=kueue_env.local_queue),
        )
    for dag_id in ("kueue_plot_a", "kueue_plot_b"):
        run = airflow_home.test_dag(dag_id, run_after=RUN_AFTER, timeout=300)
        assert run.succeeded, run.output[-6000:]
    token = httpx.post(
        f"{url}/auth/token", json={"username": "alice", "password": passwords["alice"]}, timeout=10
    ).json()["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    run_id = f"manual__{RUN_AFTER}"

    queues = httpx.get(f"{url}/kueue/queues", headers=bearer, timeout=30)
    assert queues.status_code == 200, queues.text[-2000:]
    assert f"Recent runs in ClusterQueue {kueue_env.cluster_queue}" in queues.text
    assert f"kueue_plot_a / shards / {run_id}" in queues.text, "her run, a point of the plot"
    assert "kueue_plot_b" not in queues.text
    history = httpx.get(f"{url}/kueue/api/queues", headers=bearer, timeout=30).json()["history"]
    assert {r["dag_id"] for h in history for r in h["runs"]} == {"kueue_plot_a"}, history

    task = {"run_id": run_id, "task_id": "shards", "map_index": "{MAP_INDEX}"}
    mine = httpx.get(
        f"{url}/kueue/task", params={**task, "dag_id": "kueue_plot_a"}, headers=bearer, timeout=30
    )
    assert mine.status_code == 200 and "Recent runs of this task" in mine.text, mine.text[-2000:]
    assert f"{run_id} (" in mine.text and "kueue_plot_b" not in mine.text
    for path in ("/kueue/task", "/kueue/api/task"):
        other = httpx.get(
            f"{url}{path}", params={**task, "dag_id": "kueue_plot_b"}, headers=bearer, timeout=30
        )
        assert other.status_code == 403, other.text
