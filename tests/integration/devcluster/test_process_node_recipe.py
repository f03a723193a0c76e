"""docs/process-node.md's "Your DAG on the process nodes", applied as written: its queue file with the bed's
kubectl, its DAG with ``airflow dags test``; the shards must have run as processes on the process nodes."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devcluster.cluster import build_binaries

from ..airflow_runner import AirflowHome
from ..cluster import Cluster, wait_for
from ..examples.readme_blocks import marked_blocks
from ..process_node import state_dir

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "process-node.md"


def _blocks() -> dict[str, str]:
    blocks = marked_blocks(PAGE.read_text(), "process-node")
    return {b.path: b.body for b in blocks if b.path}


@pytest.fixture
def recipe_queues(cluster: Cluster, devcluster_env: dict[str, str]) -> Iterator[list[dict[str, object]]]:
    """The page's queue file applied with kubectl as a reader would; everything it made deleted after."""
    text = _blocks()["proc-queues.yaml"]
    docs = [d for d in yaml.safe_load_all(text) if d]
    namespace = next(d["metadata"]["name"] for d in docs if d["kind"] == "Namespace")
    wait_for(f"namespace {namespace} not terminating", lambda: cluster.namespace_settled(namespace), 180)
    kubectl = [str(build_binaries() / "kubectl"), f"--kubeconfig={devcluster_env['KUBECONFIG']}"]
    applied = subprocess.run(
        [*kubectl, "apply", "--server-side", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    yield docs
    subprocess.run(
        [*kubectl, "delete", "--wait=false", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_process_node_recipe_runs_its_shards_as_processes(
    recipe_queues: list[dict[str, object]], airflow_home: AirflowHome
) -> None:
    (airflow_home.home / "dags" / "proc_demo.py").write_text(_blocks()["dags/proc_demo.py"])

    run = airflow_home.test_dag("proc_demo", timeout=420)

    assert run.succeeded, run.output[-6000:]
    found = re.search(r"submitted Job proc-demo/(\S+) \(created\) in LocalQueue proc-queue", run.output)
    assert found, run.output[-6000:]
    logs = sorted(state_dir().glob(f"*/pods/proc-demo_{found.group(1)}-*/main.log"))
    printed = sorted(line for log in logs for line in log.read_text().splitlines())
    assert printed == ["real shard 0", "real shard 1"], logs
