"""``make airflow-up`` as a newcomer meets it (``python -m tests.integration.deployment up``), in a state
directory of its own so that the bed's own deployment (``.devcluster/airflow``) is left alone.

Three traps it had: no ``kueue_blob_default`` connection (a checkpointed DAG failed on its first shard),
DAGs unpaused at creation (a scheduled DAG ran at once, before the user had made its queues), and the CLI line
it printed (``source .../env && airflow dags list``) answered ``airflow: command not found`` in a fresh shell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..deployment import REPO, RestClient, _shell_quote, free_port, wait_until

SCHEDULED_DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator

with DAG("up_scheduled", schedule=timedelta(minutes=1), start_date=datetime(2026, 1, 1), catchup=False):
    EmptyOperator(task_id="tick")
"""
pytestmark = pytest.mark.quiet  # a deployment of its own: heavy on 2 cores
FRESH_PATH = "/usr/local/bin:/usr/bin:/bin"  # a new login shell's: no venv on it


@dataclass
class Up:
    state: Path
    output: str
    env: dict[str, str]

    @property
    def env_file(self) -> Path:
        return self.state / "airflow" / "home" / "env"

    def shell(self, command: str) -> subprocess.CompletedProcess[str]:
        """``command`` in a fresh bash after the printed ``source`` line, with a PATH that lacks the venv."""
        env = {"PATH": FRESH_PATH, "HOME": os.environ.get("HOME", "/root")}
        script = f"source {_shell_quote(str(self.env_file))} && {command}"
        return subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False
        )


@pytest.fixture(scope="module")
def up(devcluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    state = tmp_path_factory.mktemp("airflow-up-state")
    (state / "env").write_text(
        "".join(
            f"export {k}={_shell_quote(v)}\n" for k, v in devcluster_env.items() if k != "DEVCLUSTER_STATE"
        )
    )
    dags = tmp_path_factory.mktemp("airflow-up-dags")
    (dags / "up_scheduled.py").write_text(SCHEDULED_DAG)
    env = {**os.environ, "DEVCLUSTER_STATE": str(state)}
    argv = [sys.executable, "-m", "tests.integration.deployment"]
    started = subprocess.run(
        [*argv, "up", "--port", str(free_port()), "--dags", str(dags)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-5000:]
        yield Up(state, started.stdout, env)
    finally:
        subprocess.run([*argv, "down"], cwd=REPO, env=env, capture_output=True, timeout=120, check=False)


def test_the_printed_cli_line_works_in_a_fresh_shell(up: Up) -> None:
    line = next(ln for ln in up.output.splitlines() if ln.startswith("CLI: "))
    assert line == f"CLI: source {up.env_file} && airflow dags list"
    listed = up.shell("airflow dags list -o json")
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-3000:]
    assert "up_scheduled" in {d["dag_id"] for d in json.loads(listed.stdout.strip().splitlines()[-1])}


def test_kueue_blob_default_points_at_the_beds_azurite(up: Up, devcluster_env: dict[str, str]) -> None:
    got = up.shell("airflow connections get kueue_blob_default -o json")
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-3000:]
    conn = json.loads(got.stdout.strip().splitlines()[-1])[0]
    assert conn["conn_type"] == "wasb"
    extra = (
        json.loads(conn["extra_dejson"]) if isinstance(conn["extra_dejson"], str) else conn["extra_dejson"]
    )
    assert extra["connection_string"] == devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]


def test_dags_start_paused_and_the_help_says_how_to_unpause(up: Up) -> None:
    assert "airflow dags unpause <dag_id>" in up.output
    saved = json.loads((up.state / "airflow" / "state.json").read_text())
    rest = RestClient(saved["url"], Path(saved["home"]) / "simple_auth_manager_passwords.json.generated")
    dag = rest.wait_for_dag("up_scheduled")
    assert dag["is_paused"] is True
    runs = rest.request("GET", "/api/v2/dags/up_scheduled/dagRuns")
    assert runs["total_entries"] == 0  # a scheduled DAG waits for the user
    unpaused = up.shell("airflow dags unpause up_scheduled -y")
    assert unpaused.returncode == 0, unpaused.stderr[-3000:]
    wait_until(
        "the unpaused DAG's first run",
        lambda: rest.request("GET", "/api/v2/dags/up_scheduled/dagRuns")["total_entries"] > 0,
        timeout=120,
    )
