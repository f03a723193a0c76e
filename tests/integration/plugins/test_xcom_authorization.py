"""The Kueue pages' parts derived from XComs need the DAG's XCom read permission, in a real ``airflow
api-server``: alice may read DAG ``kueue_xcom_plot``'s task instances but not its XComs, bob both. Her task
view shows the Jobs without the results plot and says why; her queue page's run history leaves the run out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, wait_for
from .test_api_server import start_api_server
from .test_dag_authorization import PLOTTED_DAG, RUN_AFTER

DAG_ID = "kueue_xcom_plot"
AUTH_MANAGER = '''
"""Test-only: SimpleAuthManager, except that the users of KUEUE_TEST_NO_XCOM may not read any DAG's XComs."""
import json
import os

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

NO_XCOM = set(json.loads(os.environ["KUEUE_TEST_NO_XCOM"]))


class NoXComAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None):
        if access_entity == DagAccessEntity.XCOM and user.get_name() in NO_XCOM:
            return False
        return super().is_authorized_dag(
            method=method, user=user, access_entity=access_entity, details=details
        )
'''


@pytest.fixture
def xcom_scoped_api_server(
    airflow_home: AirflowHome, kueue_env: KueueEnv, tmp_path: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    (tmp_path / "no_xcom_auth.py").write_text(AUTH_MANAGER)
    passwords = tmp_path / "passwords.json"
    env = {
        "PYTHONPATH": str(tmp_path),
        "AIRFLOW__CORE__AUTH_MANAGER": "no_xcom_auth.NoXComAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "alice:viewer,bob:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "KUEUE_TEST_NO_XCOM": json.dumps(["alice"]),
    }
    with start_api_server(airflow_home, kueue_env, env) as url:
        wait_for("the passwords file", passwords.exists, timeout=30)
        users = json.loads(passwords.read_text())
        yield (
            url,
            {
                user: httpx.post(
                    f"{url}/auth/token", json={"username": user, "password": users[user]}, timeout=10
                ).json()["access_token"]
                for user in ("alice", "bob")
            },
        )


def test_a_user_without_xcom_permission_sees_the_kueue_pages_without_the_results(
    xcom_scoped_api_server: tuple[str, dict[str, str]], airflow_home: AirflowHome, kueue_env: KueueEnv
) -> None:
    url, tokens = xcom_scoped_api_server
    airflow_home.write_dag(
        DAG_ID, PLOTTED_DAG.format(dag_id=DAG_ID, namespace=kueue_env.namespace, queue=kueue_env.local_queue)
    )
    run = airflow_home.test_dag(DAG_ID, run_after=RUN_AFTER, timeout=300)
    assert run.succeeded, run.output[-6000:]
    run_id = f"manual__{RUN_AFTER}"
    task = {"dag_id": DAG_ID, "run_id": run_id, "task_id": "shards", "map_index": "{MAP_INDEX}"}

    def get(user: str, path: str, **params: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {tokens[user]}"}
        answer = httpx.get(f"{url}{path}", params=params, headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text[-2000:]
        return answer

    bob_task = get("bob", "/kueue/task", **task).text
    assert "Recent runs of this task" in bob_task and f"{run_id} (" in bob_task
    assert f"{DAG_ID} / shards / {run_id}" in get("bob", "/kueue/queues").text

    alice_task = get("alice", "/kueue/task", **task).text
    assert f"Job {kueue_env.namespace}/" in alice_task, "her task view still shows the Jobs"
    assert "Ask for the XCom read permission of this DAG" in alice_task and f"{run_id} (" not in alice_task
    assert DAG_ID not in get("alice", "/kueue/queues").text
    history = get("alice", "/kueue/api/queues").json()["history"]
    assert not [r for h in history for r in h["runs"] if r["dag_id"] == DAG_ID], history
    # The same split on the nights and DAG run pages: bob sees the night, alice a sentence saying why not.
    for path, params in (("/kueue/nights", {}), ("/kueue/dag-run", {"run_id": run_id})):
        pages = {
            user: httpx.get(
                f"{url}{path}",
                params={"dag_id": DAG_ID, **params},
                headers={"Authorization": f"Bearer {tokens[user]}"},
                timeout=60,
            )
            for user in ("alice", "bob")
        }
        assert pages["bob"].status_code == pages["alice"].status_code == 200, pages
        assert "shards" in pages["bob"].text and "Ask for the XCom" not in pages["bob"].text, path
        assert "Ask for the XCom read permission of this DAG" in pages["alice"].text, path
        assert "task_id=shards" not in pages["alice"].text and "Task shards" not in pages["alice"].text
