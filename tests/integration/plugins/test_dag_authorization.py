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
        env = {
            "PYTHONPATH": str(tmp_path),
            "AIRFLOW__CORE__AUTH_MANAGER": "dag_scoped_auth.DagScopedAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "alice:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "KUEUE_TEST_DAG_GRANTS": json.dumps({"alice": ["a"]}),
            "AIRFLOW__KUEUE__KUBERNETES_CONN_ID": "kueue_ui_via_proxy",
            "AIRFLOW_CONN_KUEUE_UI_VIA_PROXY": json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
            ),
        }
        with start_api_server(airflow_home, kueue_env, env) as url:
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
