"""The README's "Your first DAG", run as written.

The section's marked blocks (``<!-- first-dag:... -->``) are taken from README.md as they are: the files are
saved where it says, and its shell blocks run as one bash script in a directory that looks like a fresh clone
(the repository's ``devcluster/`` and ``.venv/``, and the running cluster's state as ``.devcluster/``), with
no Airflow or Kubernetes setting in the environment. The one line not run is ``make cluster-up``: the session
fixture has started the cluster. The README's queues are applied with the bed's kubectl, the DAG runs with
``airflow dags test`` in a fresh AIRFLOW_HOME, and the report task's line must be the one the README shows.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from ..cluster import Cluster, wait_for
from .readme_blocks import marked_blocks

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
CLUSTER_UP = re.compile(r"^make cluster-up\b.*$", re.M)


def _section() -> str:
    text = README.read_text()
    start = text.index("\n## Your first DAG\n")
    return text[start : text.index("\n## ", start + 1)]


def _readme_objects(queues_yaml: str) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) of each object in the README's queue file."""
    import yaml

    return [
        (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace"))
        for d in yaml.safe_load_all(queues_yaml)
        if d
    ]


def _unfinished_jobs(cluster: Cluster, namespace: str) -> list[str]:
    jobs = cluster.batch.list_namespaced_job(namespace).items
    done = {"Complete", "Failed"}
    return [
        j.metadata.name
        for j in jobs
        if not any(c.type in done and c.status == "True" for c in (j.status.conditions or []))
    ]


def _exists(cluster: Cluster, kind: str, name: str, namespace: str | None) -> bool:
    try:
        if kind == "Namespace":
            cluster.core.read_namespace(name)
        else:
            plural = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}.get(kind)
            if plural is None:
                return True  # namespaced: goes with its namespace
            cluster.kueue_get(plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


@pytest.fixture
def leave_cluster_as_found(cluster: Cluster) -> Iterator[list[tuple[str, str, str | None]]]:
    """Objects the README's queue file creates that did not exist before are deleted afterwards, unless a Job
    still runs in its namespace (a reader following the README, or another session's run of this test, on the
    same cluster keeps theirs)."""
    objects = _readme_objects(
        next(b.body for b in marked_blocks(_section(), "first-dag") if b.kind == "file")
    )
    for kind, name, _ in objects:
        if kind == "Namespace":  # one an earlier run deleted may still be terminating: no LocalQueue in it
            wait_for(f"namespace {name} not terminating", partial(cluster.namespace_settled, name), 120)
    existed = {obj for obj in objects if _exists(cluster, *obj)}
    yield objects
    namespaces = [name for kind, name, _ in objects if kind == "Namespace"]
    if any(_unfinished_jobs(cluster, ns) for ns in namespaces):
        return
    for kind, name, namespace in reversed(objects):
        if (kind, name, namespace) in existed:
            continue
        if kind == "Namespace":
            try:
                cluster.core.delete_namespace(name, propagation_policy="Background")
            except ApiException as exc:
                if exc.status != 404:
                    raise
        elif kind == "ClusterQueue":
            cluster.kueue_delete("clusterqueues", name)
        elif kind == "ResourceFlavor":
            cluster.kueue_delete("resourceflavors", name)


def test_readme_first_dag_runs_as_written(
    devcluster_env: dict[str, str], tmp_path: Path, leave_cluster_as_found: list[tuple[str, str, str | None]]
) -> None:
    section = _section()
    blocks = marked_blocks(section, "first-dag")
    assert [b.kind for b in blocks] == ["shell", "file", "file", "shell"], blocks
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("devcluster", ".venv"):
        (clone / name).symlink_to(REPO / name)
    (clone / ".devcluster").symlink_to(Path(devcluster_env["DEVCLUSTER_STATE"]))
    for block in blocks:
        if block.kind == "file":
            assert block.path is not None
            (clone / block.path).parent.mkdir(parents=True, exist_ok=True)
            (clone / block.path).write_text(block.body)
    shell = "\n".join(b.body for b in blocks if b.kind == "shell")
    script, replaced = CLUSTER_UP.subn(": the session fixture started the cluster", shell)
    assert replaced == 1, shell
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "KUBECONFIG", "AZURE_", "PYTEST_", "VIRTUAL_ENV"))
        and k != "DEVCLUSTER_STATE"
    }

    run = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )

    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-8000:]
    assert "state=success" in output and "state=failed" not in output.lower(), output[-8000:]
    shown = re.search(r"the report's line\s+`([^`]+)`", section)
    assert shown, "the README shows the report task's line"
    assert shown.group(1) in output, output[-8000:]
    assert re.search(
        r"submitted Job first-dag/first-dag-shards-\w+ \(created\) in LocalQueue first-queue", output
    )
    assert (clone / ".demo/first-dag/airflow/airflow.db").exists(), "a fresh AIRFLOW_HOME in the clone"
