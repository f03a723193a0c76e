"""deploy/helm/values-aks.yaml: the official Airflow chart's values for AKS, checked against deploy/rbac, the
provider's [kueue] options and docker/ (no chart, Helm or cluster needed; the bed test is
tests/integration/deploy/test_helm_identities.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_kueue_provider import __version__
from airflow_kueue_provider.get_provider_info import get_provider_info

REPO = Path(__file__).resolve().parents[3]
VALUES = REPO / "deploy" / "helm" / "values-aks.yaml"
RBAC = REPO / "deploy" / "rbac"
AIRFLOW_DOCKERFILE = REPO / "docker" / "airflow" / "Dockerfile"
AKS_DOC = REPO / "docs" / "aks.md"

AIRFLOW_NAMESPACE = "airflow"  # deploy/rbac's name for Airflow's namespace
WI_CLIENT_ID = "azure.workload.identity/client-id"
WI_USE = "azure.workload.identity/use"

# Every key path the values file may set, each checked against the chart's values.yaml/values.schema.json
# (chart 1.22.0: apache/airflow 5f1ee0aea931bd3a221eab567f6ad724c587b43a, and 0655bec1 of the 1.2x line). Maps
# the schema leaves open (labels, annotations, config) and lists (env, secret) end a path. A new key: check it
# in the schema, then add it here.
CHART_KEYS = {
    "images.airflow.repository",
    "images.airflow.tag",
    "images.airflow.pullPolicy",
    "airflowVersion",
    "executor",
    "allowPodLaunching",
    "postgresql.enabled",
    "data.metadataSecretName",
    "fernetKeySecretName",
    "apiSecretKeySecretName",
    "jwtSecretName",
    "secret",
    "env",  # the chart's global env: every Airflow container (SPT_NOENV)
    "config",
    "workers.serviceAccount.create",
    "workers.serviceAccount.name",
    "workers.serviceAccount.annotations",
    "workers.labels",
    "workers.env",
    "triggerer.serviceAccount.create",
    "triggerer.serviceAccount.name",
    "triggerer.labels",
    "triggerer.env",
    "apiServer.serviceAccount.create",
    "apiServer.serviceAccount.name",
    "apiServer.serviceAccount.annotations",
    "apiServer.labels",
    "apiServer.env",
    "scheduler.serviceAccount.automountServiceAccountToken",
    "dagProcessor.serviceAccount.automountServiceAccountToken",
}
OPEN_MAPS = {"labels", "annotations", "config"}

# Airflow's components, by their section of the values file.
COMPONENTS = {
    "workers": ("workers",),
    "triggerer": ("triggerer",),
    "apiServer": ("apiServer",),
    "scheduler": ("scheduler",),
    "dagProcessor": ("dagProcessor",),
}
# Which deploy/rbac manifest binds which components' ServiceAccount.
RBAC_OF = {
    "worker-triggerer.yaml": ("workers", "triggerer"),
    "worker-forecast.yaml": ("workers",),  # optional: the forecast at submit reads ClusterQueues
    "ui.yaml": ("apiServer",),
}
TALKS_TO_CLUSTER_OR_BLOB = {"workers", "triggerer", "apiServer"}

# Chart keys that would hold a secret's value (the file names Secrets instead).
SECRET_VALUE_KEYS = {
    "fernetKey",
    "jwtSecret",
    "apiSecretKey",
    "webserverSecretKey",
    "password",
    "pass",
    "brokerUrl",
    "metadataConnection",
    "resultBackendConnection",
    "connection",
    "keytabBase64Content",
    "sshKey",
}
# Connection fields and extras that carry a credential.
SECRET_CONN_FIELDS = {"password", "login", "schema"}
SECRET_EXTRAS = {
    "connection_string",
    "shared_access_key",
    "account_key",
    "sas_token",
    "client_secret",
    "token",
    "api_key",
    "kube_config",
    "kube_config_path",
}
SECRET_TEXT = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"AccountKey=",
        r"SharedAccessSignature",
        r"[?&]sig=",
        r"-----BEGIN",
        r"DefaultEndpointsProtocol",
        r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@",  # credentials in a URL
        r"\bey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.",  # a JWT
    )
]


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    loaded = yaml.safe_load(VALUES.read_text())
    assert isinstance(loaded, dict)
    return loaded


def section(values: dict[str, Any], component: str) -> dict[str, Any]:
    node: Any = values
    for key in COMPONENTS[component]:
        node = (node or {}).get(key) or {}
    return dict(node)


def service_account(values: dict[str, Any], component: str) -> dict[str, Any]:
    return dict(section(values, component).get("serviceAccount") or {})


def created_accounts(values: dict[str, Any]) -> list[tuple[str, str]]:
    """(ServiceAccount name, component) for each ServiceAccount the chart creates from these values."""
    accounts = {c: service_account(values, c) for c in COMPONENTS}
    return [(sa["name"], c) for c, sa in accounts.items() if sa.get("create")]


def env_of(values: dict[str, Any], component: str) -> dict[str, str]:
    """The component's env values by name ("" for one taken from a Secret: ``valueFrom``)."""
    return {e["name"]: e.get("value", "") for e in section(values, component).get("env") or []}


def secret_env_of(values: dict[str, Any], component: str) -> dict[str, tuple[str, str]]:
    """The component's env taken from a Secret: name -> (Secret, key)."""
    return {
        e["name"]: (ref["name"], ref["key"])
        for e in section(values, component).get("env") or []
        if (ref := (e.get("valueFrom") or {}).get("secretKeyRef"))
    }


def rbac_docs(manifest: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((RBAC / manifest).read_text()) if d]


def subjects(manifest: str) -> set[tuple[str, str]]:
    """(name, namespace) of every ServiceAccount a binding of the manifest names."""
    return {
        (s["name"], s["namespace"])
        for doc in rbac_docs(manifest)
        for s in doc.get("subjects") or []
        if s.get("kind") == "ServiceAccount"
    }


def key_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if not isinstance(node, dict) or not node or prefix.rsplit(".", 1)[-1] in OPEN_MAPS:
        yield prefix
        return
    for key, child in node.items():
        yield from key_paths(child, f"{prefix}.{key}" if prefix else str(key))


def scalars(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, child in node.items():
            yield from scalars(child, f"{path}.{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from scalars(child, f"{path}[{i}]")
    else:
        yield path, node


def connections(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every AIRFLOW_CONN_* of every component, parsed, as '<component> <env name>' -> the connection."""
    found = {}
    for component in COMPONENTS:
        for name, raw in env_of(values, component).items():
            if name.startswith("AIRFLOW_CONN_"):
                found[f"{component} {name}"] = json.loads(raw)
    return found


def test_values_set_only_keys_checked_against_the_chart_schema(values: dict[str, Any]) -> None:
    assert sorted(set(key_paths(values)) - CHART_KEYS) == []


def test_each_service_account_is_created_once_and_is_what_its_rbac_binds(values: dict[str, Any]) -> None:
    created = [name for name, _ in created_accounts(values)]
    assert len(created) == len(set(created)), f"a ServiceAccount the chart would create twice: {created}"
    for manifest, components in RBAC_OF.items():
        names = {service_account(values, c).get("name") for c in components}
        assert None not in names, f"set serviceAccount.name for {components}: the chart would make its own"
        assert names <= set(created), f"{names} is used but no component of the chart creates it"
        expected = {(name, AIRFLOW_NAMESPACE) for name in names}
        assert subjects(manifest) == expected, manifest
        accounts = {
            (d["metadata"]["name"], d["metadata"].get("namespace"))
            for d in rbac_docs("service-accounts.yaml")  # for an Airflow installed without the chart
            if d["kind"] == "ServiceAccount"
        }
        assert {a for a in accounts if a[0] in names} == expected, "service-accounts.yaml's documents"
        declared = [d for d in rbac_docs(manifest) if d["kind"] == "ServiceAccount"]
        assert not declared, f"{manifest} re-declares the chart's ServiceAccount"


def test_other_rbac_identities_are_no_airflow_components(values: dict[str, Any]) -> None:
    """The sweeper, queue-admin and MultiKueue identities stay apart from the components' ServiceAccounts."""
    ours = {service_account(values, c).get("name") for c in COMPONENTS} - {None}
    for path in sorted(RBAC.glob("*.yaml")):
        if path.name not in RBAC_OF:
            assert not {name for name, _ in subjects(path.name)} & ours, path.name


def test_scheduler_and_dag_processor_hold_no_cluster_or_azure_identity(values: dict[str, Any]) -> None:
    bound = {name for manifest in (p.name for p in RBAC.glob("*.yaml")) for name, _ in subjects(manifest)}
    for component in ("scheduler", "dagProcessor"):
        sa = service_account(values, component)
        assert sa.get("automountServiceAccountToken") is False, component
        assert sa.get("name") not in bound and not sa.get("annotations"), component
        assert WI_USE not in (section(values, component).get("labels") or {}), component
        assert not env_of(values, component), component
    assert not [e for e in values.get("env") or [] if e["name"].startswith("AIRFLOW_CONN_")], (
        "a connection in the global env reaches every component, the scheduler too"
    )


def test_components_that_reach_the_cluster_or_blob_carry_a_workload_identity(values: dict[str, Any]) -> None:
    reaching = {c for c in COMPONENTS if any(n.startswith("AIRFLOW_CONN_") for n in env_of(values, c))}
    assert reaching == TALKS_TO_CLUSTER_OR_BLOB
    creators = dict(created_accounts(values))
    for component in sorted(reaching):
        assert (section(values, component).get("labels") or {}).get(WI_USE) == "true", component
        name = service_account(values, component)["name"]
        annotations = service_account(values, creators[name]).get("annotations") or {}
        assert str(annotations.get(WI_CLIENT_ID) or "").strip(), f"{component}: {name} has no {WI_CLIENT_ID}"


def test_connections_are_the_in_cluster_identity_and_a_keyless_blob_account(values: dict[str, Any]) -> None:
    conns = connections(values)
    kubernetes = {k: c for k, c in conns.items() if k.endswith(" AIRFLOW_CONN_KUBERNETES_DEFAULT")}
    assert {k.split()[0] for k in kubernetes} == TALKS_TO_CLUSTER_OR_BLOB
    for where, conn in kubernetes.items():
        assert conn == {"conn_type": "kubernetes", "extra": {"in_cluster": True}}, where
    blob = {k: c for k, c in conns.items() if k.endswith(" AIRFLOW_CONN_KUEUE_BLOB_DEFAULT")}
    assert {k.split()[0] for k in blob} == {"workers", "triggerer"}, "the API server reads no Blob"
    for where, conn in blob.items():
        assert conn["conn_type"] == "wasb", where
        assert re.fullmatch(r"https://[a-z0-9]+\.blob\.core\.windows\.net/", conn["host"]), where
        assert set(conn) == {"conn_type", "host"}, f"{where}: DefaultAzureCredential needs nothing more"


def test_kueue_options_are_the_providers_and_name_the_rbac_team_namespace(values: dict[str, Any]) -> None:
    options = get_provider_info()["config"]["kueue"]["options"]
    kueue = values["config"]["kueue"]
    assert set(kueue) <= set(options), sorted(set(kueue) - set(options))
    assert all(isinstance(v, str) for v in kueue.values()), "airflow.cfg values: strings"
    assert kueue["kubernetes_conn_id"] == "kubernetes_default"
    sensitive = {name for name, option in options.items() if option.get("sensitive")}
    assert not sensitive & set(kueue), "sensitive options come from a Secret, not the chart's ConfigMap"
    for component in TALKS_TO_CLUSTER_OR_BLOB:  # from a Secret, in the components that use them
        from_secrets = set(secret_env_of(values, component))
        assert {f"AIRFLOW__KUEUE__{name.upper()}" for name in sensitive} <= from_secrets, component
    team_namespaces = {
        d["metadata"]["namespace"] for d in rbac_docs("worker-triggerer.yaml") if d["kind"] == "RoleBinding"
    }
    for option in ("ui_namespaces", "allowed_namespaces"):
        assert set(kueue[option].split(",")) == team_namespaces, option
    assert set(values["config"]) == {"kueue"}, "only the provider's section: Airflow's defaults otherwise"


def test_no_secret_value_is_written_in_the_file(values: dict[str, Any]) -> None:
    for path, value in scalars(values):
        key = path.rsplit(".", 1)[-1].split("[", 1)[0]
        assert not (key in SECRET_VALUE_KEYS and value not in (None, "")), path
        for pattern in SECRET_TEXT:
            assert not pattern.search(str(value)), f"{path}: {pattern.pattern}"
    for where, conn in connections(values).items():
        assert not SECRET_CONN_FIELDS & set(conn), where
        assert not SECRET_EXTRAS & set(conn.get("extra") or {}), where
    for pattern in SECRET_TEXT:  # comments too
        assert not pattern.search(VALUES.read_text()), pattern.pattern


def test_the_image_is_docker_airflow_with_this_provider(values: dict[str, Any]) -> None:
    base = re.search(r"^FROM apache/airflow:(\d+\.\d+\.\d+)", AIRFLOW_DOCKERFILE.read_text(), re.MULTILINE)
    assert base, AIRFLOW_DOCKERFILE
    assert values["airflowVersion"] == base.group(1)
    image = values["images"]["airflow"]
    assert image["repository"].endswith(".azurecr.io/airflow-kueue") and image["tag"] == __version__
    assert "docker/airflow/Dockerfile" in VALUES.read_text()


def test_docs_install_the_chart_version_the_values_were_checked_against() -> None:
    checked = re.search(r"Checked against chart (\d+\.\d+\.\d+)", VALUES.read_text())
    assert checked
    doc = AKS_DOC.read_text()
    assert f"--version {checked.group(1)}" in doc and "deploy/helm/values-aks.yaml" in doc
