"""Session fixture: use the running local cluster, or start it (``python -m devcluster up`` is idempotent)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config

from devcluster.layout import Layout

from .airflow_runner import AirflowHome
from .cluster import Cluster, KueueEnv, create_kueue_env, delete_kueue_env
from .multikueue_lifetime import mark_ended, needs_workers, stop_workers

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def devcluster_env() -> dict[str, str]:
    """Start (or reuse) the local cluster once per session and export its env lines to this process."""
    subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True)
    env = Layout.default().exported_env()  # DEVCLUSTER_STATE, else .devcluster/ in the repository
    os.environ.update(env)
    return env


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test that needs the MultiKueue workers has ended, stop them (multikueue_lifetime)."""
    yield
    state = Layout.default().state
    if needs_workers(item) and mark_ended(state, item):
        stop_workers(REPO, state)


@pytest.fixture(scope="session")
def cluster(devcluster_env: dict[str, str]) -> Cluster:
    return Cluster(config.new_client_from_config(config_file=devcluster_env["KUBECONFIG"]))


@pytest.fixture
def kueue_env_factory(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Callable[..., KueueEnv]]:
    """Make isolated namespace + ResourceFlavor + ClusterQueue + LocalQueue sets; all removed afterwards."""
    made: list[KueueEnv] = []

    def make(**kwargs: Any) -> KueueEnv:
        env = create_kueue_env(cluster, request.node.name, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        delete_kueue_env(env)


@pytest.fixture(scope="session")
def multikueue_workers(devcluster_env: dict[str, str]) -> list[Cluster]:
    """MultiKueue worker clusters (started once, or reused) with the main cluster as their manager."""
    from devcluster.layout import Layout
    from devcluster.multikueue import WORKERS

    subprocess.run([sys.executable, "-m", "devcluster", "multikueue", "up"], cwd=REPO, check=True)
    manager = Layout(Path(devcluster_env["DEVCLUSTER_STATE"]))
    return [
        Cluster(config.new_client_from_config(config_file=str(manager.worker(n).kubeconfig)))
        for n in range(1, WORKERS + 1)
    ]


@dataclass(frozen=True)
class MultiKueueEnv:
    """The manager's queues (a ClusterQueue that dispatches through the ``multikueue`` AdmissionCheck) and
    the same namespace and LocalQueue on each worker, with quota of its own."""

    manager: KueueEnv
    workers: list[KueueEnv]


@pytest.fixture
def multikueue_env_factory(
    kueue_env_factory: Callable[..., KueueEnv],
    multikueue_workers: list[Cluster],
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., MultiKueueEnv]]:
    """``make(worker_cpu=["4", "4"], **manager_kwargs)``: one MultiKueueEnv; all removed afterwards."""
    from devcluster.multikueue import ADMISSION_CHECK

    made: list[KueueEnv] = []

    def make(worker_cpu: list[str] | None = None, **kwargs: Any) -> MultiKueueEnv:
        manager = kueue_env_factory(admission_checks=[ADMISSION_CHECK], **kwargs)
        workers = []
        for worker, cpu in zip(
            multikueue_workers, worker_cpu or ["64"] * len(multikueue_workers), strict=True
        ):
            env = create_kueue_env(
                worker,
                request.node.name,
                cpu=cpu,
                namespace=manager.namespace,
                create_namespace=True,
                local_queue=manager.local_queue,
                preemption=kwargs.get("preemption"),
            )
            made.append(env)
            workers.append(env)
        return MultiKueueEnv(manager, workers)

    yield make
    for env in made:
        delete_kueue_env(env)


@pytest.fixture
def kueue_env(kueue_env_factory: Callable[..., KueueEnv]) -> KueueEnv:
    return kueue_env_factory()


@pytest.fixture(scope="session")
def migrated_airflow_db(devcluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``airflow db migrate`` per test run, shared by the pytest-xdist workers (each copies it)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    template = shared / "airflow-db-template"
    with open(shared / "airflow-db-template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (template / "migrated").exists():
            AirflowHome.create(template, devcluster_env)
            (template / "migrated").touch()
    return template / "airflow.db"


@pytest.fixture(scope="session")
def airflow_home(
    devcluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, migrated_airflow_db: Path
) -> AirflowHome:
    """An Airflow 3 home (SQLite, a copy of the migrated DB); kubernetes_default is the local cluster."""
    return AirflowHome.create(tmp_path_factory.mktemp("airflow-home"), devcluster_env, migrated_airflow_db)
