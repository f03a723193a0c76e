"""docs/quick-start.md, its steps in order, on the local bed with a real Airflow deployment.

The deployment's DAGs start paused, as a fresh Airflow's do (``[core] dags_are_paused_at_creation``; the
bed's other deployments turn it off): a quick start that only said ``airflow dags trigger first_dag`` left the
run queued for ever. Step 1 (Kueue) is the bed's own, checked to serve the page's API. Step 2 applies the
queue file of docs/first-dag.md; step 3 the worker RBAC with ``batch-jobs`` replaced, bound to a
ServiceAccount made as deploy/rbac/service-accounts.yaml declares it (the ``Identity`` helper, in a home
namespace of its own), whose token is the ``kubernetes_default`` connection of step 4, beside
``kueue_blob_default`` on Azurite; step 5 saves the DAG without its ``annotations=`` line. Step 6: first what
the page said before (``airflow dags trigger first_dag`` alone), whose run must still be queued 15 s later,
then the page's marked shell block (unpause, trigger); both runs must succeed with the report the page's first
DAG promises.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from ..cluster import Cluster, short_id, wait_for
from ..deploy.test_rbac import Identity
from ..deployment import AIRFLOW, TEMPLATE_DB, AirflowDeployment, Postgres
from ..examples.readme_blocks import marked_blocks

pytestmark = pytest.mark.quiet

REPO = Path(__file__).resolve().parents[3]
QUICK_START = REPO / "docs" / "quick-start.md"
FIRST_DAG = REPO / "docs" / "first-dag.md"
SHELL_BLOCK = re.compile(r"<!-- quick-start:shell -->\n[ ]*```bash\n(?P<body>.*?)\n[ ]*```", re.S)
KUEUE_API = "kueue.x-k8s.io/v1beta2"
PAUSED_WAIT = 15  # seconds a run of the paused DAG is watched not to start (the scheduler loops every ~1 s)


def _first_dag_files() -> dict[str, str]:
    return {b.path: b.body for b in marked_blocks(FIRST_DAG.read_text(), "first-dag") if b.path}


def _shell(env: dict[str, str], script: str) -> None:
    """``script`` as a reader's shell runs it, where Airflow is installed (the venv's bin on PATH)."""
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]


def _runs(bed: AirflowDeployment) -> list[str]:
    """The DAG's run ids, oldest first."""
    runs = bed.rest.request("GET", "/api/v2/dags/first_dag/dagRuns", params={"order_by": "run_after"})
    return [str(r["dag_run_id"]) for r in runs["dag_runs"]]


@pytest.fixture
def queues(cluster: Cluster) -> Iterator[list[dict[str, Any]]]:
    """Step 2: the first DAG's queue file, applied; what it made is deleted after (first-dag.md's names are
    the docs' alone: tests/unit/docs/test_doc_names.py)."""
    docs = [d for d in yaml.safe_load_all(_first_dag_files()[".demo/first-dag/queues.yaml"]) if d]
    assert {d["apiVersion"] for d in docs if d["kind"] != "Namespace"} == {KUEUE_API}
    namespace = next(d["metadata"]["name"] for d in docs if d["kind"] == "Namespace")
    wait_for(f"namespace {namespace} not terminating", partial(cluster.namespace_settled, namespace), 180)
    plurals = {
        "ResourceFlavor": "resourceflavors",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
    }
    made: list[tuple[str, str]] = []
    for doc in docs:
        kind, meta = doc["kind"], doc["metadata"]
        try:
            if kind == "Namespace":
                cluster.core.create_namespace(doc)
            else:
                cluster.kueue_create(plurals[kind], doc, namespace=meta.get("namespace"))
            made.append((kind, meta["name"]))
        except ApiException as exc:
            if exc.status != 409:  # there already (another run's, or a reader's): keep it
                raise
    yield docs
    for kind, name in reversed(made):
        if kind == "Namespace":
            cluster.core.delete_namespace(name, propagation_policy="Background")
        elif kind != "LocalQueue":  # goes with its namespace
            cluster.kueue_delete(plurals[kind], name)


@pytest.fixture
def worker_identity(
    cluster: Cluster, queues: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Identity]:
    """Step 3: deploy/rbac/worker-triggerer.yaml into the queue file's namespace."""
    namespace = next(d["metadata"]["name"] for d in queues if d["kind"] == "Namespace")
    made = Identity(cluster, "worker-triggerer.yaml", namespace, monkeypatch, tmp_path)
    yield made
    made.delete()


def test_the_quick_start_runs_to_a_successful_run_on_a_deployment_whose_dags_start_paused(
    worker_identity: Identity,
    postgres_server: Postgres,
    devcluster_env: dict[str, str],
    tmp_path: Path,
) -> None:
    page = QUICK_START.read_text()
    assert "Kueue** v0.15 or later" in page, "step 1 names the minimum Kueue"
    kube = json.loads(os.environ[f"AIRFLOW_CONN_{worker_identity.conn_id.upper()}"])
    kube["extra"].pop("namespace", None)  # the page's connection: a kubeconfig, nothing else
    blob = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    database = f"quick_start_{short_id()}"
    postgres_server.create_database(database, template=TEMPLATE_DB)
    bed = AirflowDeployment.create(
        tmp_path / "airflow",
        postgres_server,
        database,
        devcluster_env,
        config={"core.dags_are_paused_at_creation": "True"},  # a fresh Airflow's default
    )
    bed.env.pop("KUBECONFIG", None)  # the bed's admin: nobody's identity here
    bed.env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(kube)  # step 4
    bed.env["AIRFLOW_CONN_KUEUE_BLOB_DEFAULT"] = json.dumps(blob)
    dag = "".join(  # step 5: without its annotations= line
        line
        for line in _first_dag_files()[".demo/first-dag/dags/first_dag.py"].splitlines(keepends=True)
        if "annotations=" not in line
    )
    try:
        bed.start(triggerers=1)
        (bed.home / "dags" / "first_dag.py").write_text(dag)
        bed.rest.wait_for_dag("first_dag")
        assert (bed.rest.dag("first_dag") or {}).get("is_paused") is True, "a new DAG starts paused"
        shell = partial(_shell, {**bed.env, "PATH": f"{Path(AIRFLOW).parent}:{bed.env.get('PATH', '')}"})
        # The trap: what the page said before, `airflow dags trigger first_dag` alone, makes a run that waits.
        shell("airflow dags trigger first_dag")
        wait_for("the first run", partial(_runs, bed), timeout=60)
        (stuck,) = _runs(bed)
        time.sleep(PAUSED_WAIT)
        assert bed.rest.dag_run("first_dag", stuck)["state"] == "queued", "a paused DAG's run waits"
        found = SHELL_BLOCK.search(page)
        assert found, "step 6's marked shell block"
        shell(textwrap.dedent(found.group("body")))  # unpause, trigger: both runs go
        wait_for("the page's run", lambda: len(_runs(bed)) == 2, timeout=60)
        for run_id in _runs(bed):
            run = bed.rest.wait_for_run("first_dag", run_id, timeout=420, check=bed.check_alive)
            assert run["state"] == "success", bed.rest.states("first_dag", run_id)
            line = bed.rest.xcom("first_dag", run_id, "report")
            assert line == "4/4 shards done (0-3)", line
    except BaseException:
        print(bed.log_tails(80))
        raise
    finally:
        bed.stop()
