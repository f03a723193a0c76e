"""deploy/helm/values-aks.yaml's identities on the local bed: every Airflow component runs as the
ServiceAccount the values file gives it, with the rights deploy/rbac binds to that name and nothing else, the
nightly example DAG succeeds through them, and the API server's Kueue page shows its Job.

The chart's part is played by hand: the values file's ServiceAccounts are created in an ``airflow-<id>``
namespace, deploy/rbac/worker-triggerer.yaml and ui.yaml bind them into a fresh team namespace (with its own
LocalQueue) in place of ``batch-jobs``, and the values file's ``config`` becomes ``AIRFLOW__SECTION__KEY``
(that namespace for ``batch-jobs``). The processes run outside the cluster, so each component's in-cluster
connection becomes a kubeconfig holding its own ServiceAccount's token, and the keyless Blob connection
becomes Azurite's.

Worker and scheduler: the bed runs LocalExecutor, so tasks run in the scheduler's child processes; the
scheduler therefore holds the values file's *workers* identity and Blob connection, standing in for the
chart's Celery workers (on AKS the scheduler pod holds none). The DAG processor gets no cluster identity at
all (no connection, a KUBECONFIG that does not exist), as in the values file.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import yaml
from azure.storage.blob import BlobServiceClient
from kubernetes import client, utils

from ..airflow_deployment.scenarios import wait_for_success
from ..cluster import Cluster, KueueEnv, short_id
from ..deployment import TEMPLATE_DB, AirflowDeployment, Postgres, started_postgres
from ..tenant import token_kubeconfig

REPO = Path(__file__).resolve().parents[3]
VALUES = REPO / "deploy" / "helm" / "values-aks.yaml"
RBAC = REPO / "deploy" / "rbac"
MANIFESTS = ("worker-triggerer.yaml", "ui.yaml")
EXAMPLE = REPO / "example_dags" / "genomics_nightly.py"
DAG_ID, TASK_ID = "genomics_nightly", "align_chromosome_shards"
SHARDS, PARALLELISM = 12, 6
# The bed's components (AirflowDeployment.component_env keys) and the values file's section each stands for.
STANDS_FOR = {"scheduler": "workers", "triggerer": "triggerer", "api": "apiServer", "dag": "dagProcessor"}
KUBERNETES_CONN, BLOB_CONN = "AIRFLOW_CONN_KUBERNETES_DEFAULT", "AIRFLOW_CONN_KUEUE_BLOB_DEFAULT"
IDENTITY_KEY = "AIRFLOW__KUEUE__IDENTITY_KEY"


def _apply_rbac(
    cluster: Cluster,
    home: str,
    team: str,
    created: set[str],
    suffix: str,
    cluster_scoped: list[tuple[str, str]],
) -> None:
    """The manifests' Roles and bindings, ``airflow`` -> ``home`` and ``batch-jobs`` -> ``team``; their
    ServiceAccounts must be the values file's. Cluster-scoped objects made are added to ``cluster_scoped``."""
    where = {"airflow": home, "batch-jobs": team}
    for manifest in MANIFESTS:
        for doc in yaml.safe_load_all((RBAC / manifest).read_text()):
            kind, meta = doc["kind"], doc["metadata"]
            if kind == "ServiceAccount":
                assert meta["name"] in created, f"{manifest}'s ServiceAccount is not one of the values file's"
                continue
            if "namespace" in meta:
                meta["namespace"] = where.get(meta["namespace"], meta["namespace"])
            for subject in doc.get("subjects", []):
                assert subject["name"] in created, (
                    f"{manifest} binds {subject['name']}: not in the values file"
                )
                subject["namespace"] = where[subject["namespace"]]
            if doc.get("roleRef", {}).get("kind") == "ClusterRole":  # renamed below, per test
                doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
            if kind.startswith("Cluster"):
                meta["name"] = f"{meta['name']}-{suffix}"
                cluster_scoped.append((kind, meta["name"]))
            utils.create_from_dict(cluster.api, doc)


def _kubeconfig(cluster: Cluster, name: str, namespace: str, path: Path) -> str:
    token = cluster.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    path.write_text(yaml.safe_dump(token_kubeconfig(cluster, token)))
    return str(path)


def test_each_component_runs_as_its_values_file_identity_and_the_nightly_dag_succeeds(
    kueue_env: KueueEnv, cluster: Cluster, devcluster_env: dict[str, str], tmp_path: Path
) -> None:
    values = yaml.safe_load(VALUES.read_text())
    sections: dict[str, dict[str, Any]] = {bed: values.get(name) or {} for bed, name in STANDS_FOR.items()}
    accounts = {bed: (s.get("serviceAccount") or {}).get("name") for bed, s in sections.items()}
    created = {accounts[bed] for bed, s in sections.items() if (s.get("serviceAccount") or {}).get("create")}
    team, suffix = kueue_env.namespace, short_id()
    home = f"airflow-{suffix}"
    base = f"genomics-{suffix}"
    blob_connection_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    blob = BlobServiceClient.from_connection_string(blob_connection_string)
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    cluster.core.create_namespace({"metadata": {"name": home}})
    cluster_scoped: list[tuple[str, str]] = []
    pg: Postgres | None = None
    bed: AirflowDeployment | None = None
    try:
        for name in sorted(created):
            cluster.core.create_namespaced_service_account(home, {"metadata": {"name": name}})
        _apply_rbac(cluster, home, team, created, suffix, cluster_scoped)
        kubeconfigs = {
            name: _kubeconfig(cluster, name, home, tmp_path / f"kubeconfig-{name}") for name in created
        }

        config = {
            f"{section}.{key}": str(value).replace("batch-jobs", team)
            for section, options in values["config"].items()
            for key, value in options.items()
        }
        config["scheduler.use_job_schedule"] = "False"  # only the run the test triggers, no nightly one
        pg = started_postgres(devcluster_env)
        bed = AirflowDeployment.create(tmp_path / "airflow", pg, TEMPLATE_DB, devcluster_env, config=config)
        for inherited in ("KUBECONFIG", KUBERNETES_CONN, BLOB_CONN):  # the bed's admin identity: nobody's
            bed.env.pop(inherited, None)
        shared_secrets = {s["envName"]: secrets.token_hex(32) for s in values.get("secret") or []}
        bed.env.update(shared_secrets)  # the chart's top-level `secret`: every component
        component_secrets: dict[
            str, str
        ] = {}  # a component env's valueFrom (the identity key): one value each
        bed.env.update(
            {
                "GENOMICS_SHARDS": str(SHARDS),
                "GENOMICS_PARALLELISM": str(PARALLELISM),
                "GENOMICS_RUN_DURATION": "1s",
                "GENOMICS_NAMESPACE": team,
                "GENOMICS_QUEUE": kueue_env.local_queue,
                "GENOMICS_BLOB_CONTAINER": base,
            }
        )
        azurite = {"conn_type": "wasb", "extra": {"connection_string": blob_connection_string}}
        for component, section in sections.items():
            names = {e["name"] for e in section.get("env") or []}
            env = {"KUBECONFIG": str(tmp_path / "no-cluster-identity")}
            if KUBERNETES_CONN in names:
                env["KUBECONFIG"] = kubeconfigs[accounts[component]]
                env[KUBERNETES_CONN] = json.dumps(
                    {"conn_type": "kubernetes", "extra": {"kube_config_path": env["KUBECONFIG"]}}
                )
            if BLOB_CONN in names:
                env[BLOB_CONN] = json.dumps(azurite)
            for entry in section.get("env") or []:
                if "valueFrom" in entry:
                    env[entry["name"]] = component_secrets.setdefault(entry["name"], secrets.token_hex(32))
            bed.component_env[component] = env
        assert set(bed.component_env["dag"]) == {"KUBECONFIG"}, "the DAG processor holds no identity"
        assert set(bed.component_env["scheduler"]) == {"KUBECONFIG", KUBERNETES_CONN, BLOB_CONN, IDENTITY_KEY}
        assert IDENTITY_KEY not in bed.env, "only the components that seal Jobs hold the identity key"
        bed.start(triggerers=1)

        bed.write_dag(DAG_ID, EXAMPLE.read_text())
        bed.rest.wait_for_dag(DAG_ID)
        run_id = bed.rest.trigger(DAG_ID)
        wait_for_success(bed, DAG_ID, run_id, timeout=300)
        result = bed.rest.xcom(DAG_ID, run_id, TASK_ID)
        assert result["completed_indexes"] == f"0-{SHARDS - 1}" and result["failed"] == 0, result

        # The Kueue page, read by the API server with its own (read-only) identity.
        task = {"dag_id": DAG_ID, "run_id": run_id, "task_id": TASK_ID}
        page = bed.rest.request("GET", "/kueue/api/task", params=task)
        panels = {job["name"]: job for job in page["jobs"]}
        assert result["job_name"] in panels, page
        assert panels[result["job_name"]]["grid"]["counts"]["done"] == SHARDS, panels[result["job_name"]]
    except BaseException:
        if bed is not None:
            print(bed.log_tails(80))
        raise
    finally:
        if bed is not None:
            bed.stop()
        if pg is not None:
            pg.stop()
        for kind, name in cluster_scoped:
            (rbac.delete_cluster_role if kind == "ClusterRole" else rbac.delete_cluster_role_binding)(name)
        cluster.core.delete_namespace(home, propagation_policy="Background")
        for container in blob.list_containers(name_starts_with=base):
            blob.delete_container(container.name)
