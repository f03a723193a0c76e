"""The plugin served by Airflow's own API server (``airflow api-server``), with Airflow's login."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from ..airflow_runner import AIRFLOW, AirflowHome
from ..cluster import KueueEnv, wait_for


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def start_api_server(
    airflow_home: AirflowHome,
    kueue_env: KueueEnv,
    extra_env: dict[str, str] | None = None,
    base_path: str = "",
    airflow: str = AIRFLOW,
) -> Iterator[str]:
    """A real ``airflow api-server`` on a free loopback port; yields its URL.

    With ``base_path`` (e.g. ``/airflow``) Airflow is served under that path (``[api] base_url``), as behind
    a reverse proxy, and the URL ends with it. ``airflow``: the executable (another venv's Airflow)."""
    port = _free_port()
    env = {**airflow_home.env, "AIRFLOW__KUEUE__UI_NAMESPACES": kueue_env.namespace, **(extra_env or {})}
    if base_path:
        env["AIRFLOW__API__BASE_URL"] = f"http://127.0.0.1:{port}{base_path}/"
    log_path = airflow_home.home / f"api-server-{port}.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [airflow, "api-server", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=airflow_home.home,  # outside the source tree, as deployed (see tests/unit/plugins)
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}{base_path}"

    def up() -> bool:
        assert proc.poll() is None, log_path.read_text()[-3000:]
        try:
            return httpx.get(f"{url}/api/v2/version", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for("airflow api-server", up, timeout=120, interval=1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()


@pytest.fixture
def api_server(airflow_home: AirflowHome, kueue_env: KueueEnv) -> Iterator[str]:
    with start_api_server(airflow_home, kueue_env) as url:
        yield url


def _login(airflow_home: AirflowHome, url: str) -> str:
    passwords = json.loads((airflow_home.home / "simple_auth_manager_passwords.json.generated").read_text())
    user, password = next(iter(passwords.items()))
    answer = httpx.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=10)
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def test_api_server_serves_the_dashboard_behind_its_login(
    api_server: str, airflow_home: AirflowHome, kueue_env: KueueEnv
) -> None:
    assert httpx.get(f"{api_server}/kueue/api/queues", timeout=10).status_code == 401
    assert (
        httpx.get(f"{api_server}/kueue/queues", headers={"Authorization": "Bearer nope"}).status_code == 403
    )

    token = _login(airflow_home, api_server)
    bearer = {"Authorization": f"Bearer {token}"}
    page = httpx.get(f"{api_server}/kueue/queues", headers=bearer, timeout=30)
    assert page.status_code == 200 and kueue_env.cluster_queue in page.text
    # The UI's own session cookie works too, as in the external view's iframe.
    task = httpx.get(
        f"{api_server}/kueue/task",
        params={"dag_id": "d", "run_id": "r", "task_id": "t"},
        cookies={"_token": token},
        timeout=30,
    )
    assert task.status_code == 200 and "has no Kueue Job" in task.text

    plugins = httpx.get(f"{api_server}/api/v2/plugins", headers=bearer, timeout=10).json()["plugins"]
    kueue = next(p for p in plugins if p["name"] == "kueue")
    assert {v["url_route"] for v in kueue["external_views"]} == {"kueue-queues", "kueue-task"}
