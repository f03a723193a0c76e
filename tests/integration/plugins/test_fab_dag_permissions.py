"""DAG-level permissions of the FAB auth manager on every Kueue route, in a real ``airflow api-server``: on
this venv's Airflow and on the lowest supported one (3.1.0, whose ``requires_access_dag`` read ``dag_id`` only
from the path: a check left to it let a user allowed DAG ``a`` read DAG ``b``'s Jobs).

alice's role reads DAG ``a`` only (``DAG:a``, its runs and task instances, the cluster activity view). The
Kueue pages read the cluster through a loopback proxy that counts connections: a refused page makes none.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from devcluster.layout import PORTS

from ..airflow_runner import AIRFLOW, AirflowHome
from ..cluster import KueueEnv
from ..tcp_proxy import FreezableProxy, kubeconfig_through
from .test_api_server import start_api_server

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
FLOOR_AIRFLOW = "3.1.0"
FLOOR_VENV = Path.home() / ".cache" / "airflow-kueue-provider" / f"venv-airflow-{FLOOR_AIRFLOW}"
FLOOR_PINS = ("structlog<25.5",)
"""Pins for 3.1.0, which lacks upper bounds where the newest breaks it (structlog 25.5 dropped ``Styles``)."""
REPO = Path(__file__).resolve().parents[3]
PASSWORD = "alice-reads-a"

ROLE_AND_USER = """
import sys
from airflow.providers.fab.auth_manager.cli_commands.utils import get_application_builder

with get_application_builder() as appbuilder:
    sm = appbuilder.sm
    role = sm.find_role("dag_a_reader") or sm.add_role("dag_a_reader")
    for resource in ("DAG:a", "DAG Runs", "Task Instances", "Task Logs", "Cluster Activity", "Website"):
        sm.add_permission_to_role(role, sm.create_permission("can_read", resource))
    if sm.find_user(username="alice") is None:
        assert sm.add_user("alice", "Alice", "A", "alice@example.invalid", role, password=sys.argv[1])
"""

DAG_ROUTES = (
    "/task",
    "/api/task",
    "/api/task/stream",
    "/api/task/log",
    "/nights",
    "/api/nights",
    "/dag-run",
    "/api/dag-run",
)
"""Every route of the app that serves a dag_id (the test below checks the list against the app)."""
ALLOWED_STATUS = {"/api/task/log": 404}
"""An allowed request's status where it is not 200: the log tail of a Job the task instance does not have."""


def _floor_venv() -> Path:
    """Airflow 3.1.0 with the FAB provider and this checkout (editable) in a venv of its own, built once
    (a few minutes) and kept outside the repo; concurrent workers wait for the one building it."""
    FLOOR_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(FLOOR_VENV.parent / f"venv-airflow-{FLOOR_AIRFLOW}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = FLOOR_VENV / ".kueue-ready"
        pip = [str(FLOOR_VENV / "bin" / "pip"), "install", "-q"]
        # Both distributions from this checkout, in one resolve (the provider pins the worker package,
        # which no index has): docs/install.md. The marker names the recipe, so an older venv is redone.
        this_checkout = ["-e", str(REPO / "worker-package"), "-e", str(REPO)]
        marker = f"{REPO}\nprovider and worker package"
        if not ready.exists():
            subprocess.run([sys.executable, "-m", "venv", str(FLOOR_VENV)], check=True)
            packages = [f"apache-airflow=={FLOOR_AIRFLOW}", "apache-airflow-providers-fab", *FLOOR_PINS]
            subprocess.run([*pip, *packages, *this_checkout], check=True, timeout=1800)
            ready.write_text(marker)
        elif ready.read_text() != marker:
            # The venv is kept per user, not per checkout: its editable install must point at this one (a
            # venv made by a checkout elsewhere failed `airflow db migrate` with "No module named ...").
            subprocess.run([*pip, "--no-deps", *this_checkout], check=True, timeout=600)
            ready.write_text(marker)
    return FLOOR_VENV


@dataclass
class FabServer:
    url: str
    proxy: FreezableProxy
    version: str

    def bearer(self) -> dict[str, str]:
        answer = httpx.post(
            f"{self.url}/auth/token", json={"username": "alice", "password": PASSWORD}, timeout=30
        )
        assert answer.status_code in (200, 201), answer.text
        return {"Authorization": f"Bearer {answer.json()['access_token']}"}


def _fab_home(
    airflow: str, home: Path, devcluster_env: dict[str, str], migrated_airflow_db: Path | None
) -> AirflowHome:
    """An Airflow home whose auth manager is FAB, with alice and her role in its database."""
    env = {**os.environ, "AIRFLOW__CORE__AUTH_MANAGER": FAB}
    if airflow == AIRFLOW:
        airflow_home = AirflowHome.create(home, {**devcluster_env, **env}, migrated_airflow_db)
    else:  # another Airflow migrates a database of its own (this venv's would be newer than it reads)
        (home / "dags").mkdir(parents=True, exist_ok=True)
        airflow_home = AirflowHome(
            home,
            {
                **env,
                **devcluster_env,
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            },
        )
    subprocess.run(
        [airflow, "db", "migrate"], env=airflow_home.env, check=True, capture_output=True, timeout=600
    )
    python = str(Path(airflow).with_name("python"))
    made = subprocess.run(
        [python, "-c", ROLE_AND_USER, PASSWORD],
        env=airflow_home.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    return airflow_home


@pytest.fixture(params=["this venv", f"Airflow {FLOOR_AIRFLOW}"])
def fab_server(
    request: pytest.FixtureRequest,
    kueue_env: KueueEnv,
    devcluster_env: dict[str, str],
    migrated_airflow_db: Path,
    tmp_path: Path,
) -> Iterator[FabServer]:
    airflow = AIRFLOW if request.param == "this venv" else str(_floor_venv() / "bin" / "airflow")
    home = _fab_home(airflow, tmp_path / "home", devcluster_env, migrated_airflow_db)
    version = subprocess.run([airflow, "version"], env=home.env, capture_output=True, text=True).stdout
    with FreezableProxy("127.0.0.1", PORTS.apiserver).running() as proxy:
        kubeconfig = kubeconfig_through(
            proxy, Path(devcluster_env["KUBECONFIG"]), PORTS.apiserver, tmp_path / "ui-kubeconfig"
        )
        env = {
            # 3.1.0 signs tokens with iss=None without it, which PyJWT >= 2.10 refuses (3.1.8 fixed it).
            "AIRFLOW__API_AUTH__JWT_ISSUER": "airflow-kueue-tests",
            "AIRFLOW__KUEUE__KUBERNETES_CONN_ID": "kueue_ui_via_proxy",
            "AIRFLOW_CONN_KUEUE_UI_VIA_PROXY": json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
            ),
        }
        with start_api_server(home, kueue_env, env, airflow=airflow) as url:
            yield FabServer(url, proxy, version.strip().splitlines()[-1] if version.strip() else "?")


def test_the_list_of_dag_routes_is_every_route_of_the_app_that_serves_a_dag_id() -> None:
    from airflow_kueue_provider.plugins.dashboard_app import create_app

    served = {
        r.path
        for r in create_app().routes
        if isinstance(r, APIRoute)
        and any(p.name == "dag_id" for p in r.dependant.query_params + r.dependant.path_params)
    }
    assert served == set(DAG_ROUTES)


def test_a_user_allowed_only_dag_a_gets_403_on_every_kueue_route_of_dag_b_and_no_route_serves_api_docs(
    fab_server: FabServer,
) -> None:
    """One api-server per Airflow version (each takes about a minute to start): the API docs routes first
    (no login: 404), then the per-DAG checks."""
    for path in ("/kueue/openapi.json", "/kueue/docs", "/kueue/redoc"):
        answer = httpx.get(f"{fab_server.url}{path}", timeout=30)
        assert answer.status_code == 404, f"{fab_server.version} {path}: {answer.status_code}"
    bearer = fab_server.bearer()
    task = {"run_id": "r", "task_id": "t", "map_index": "{MAP_INDEX}", "job": "", "index": "0"}
    for path in DAG_ROUTES:
        refused = httpx.get(
            f"{fab_server.url}/kueue{path}", params={**task, "dag_id": "b"}, headers=bearer, timeout=30
        )
        assert refused.status_code == 403, (
            f"{fab_server.version} {path}: {refused.status_code} {refused.text}"
        )
    assert fab_server.proxy.connections == 0, "no Kubernetes request was made for the refused routes"

    for path in DAG_ROUTES:
        allowed = httpx.get(
            f"{fab_server.url}/kueue{path}", params={**task, "dag_id": "a"}, headers=bearer, timeout=30
        )
        want = ALLOWED_STATUS.get(path, 200)
        assert allowed.status_code == want, f"{fab_server.version} {path}: {allowed.text[-2000:]}"
    assert fab_server.proxy.connections > 0, "the allowed routes read the cluster"
    queues = httpx.get(f"{fab_server.url}/kueue/api/queues", headers=bearer, timeout=30)
    assert queues.status_code == 200, queues.text[-2000:]
