"""A second team in the victim's namespace: a ServiceAccount with an ordinary Role, as a client with only its
token (the tenancy tests' attacker; `tests/integration/deploy/test_rbac.py` runs the Airflow components)."""

from __future__ import annotations

from typing import Any

from kubernetes import client, config

from .cluster import Cluster, short_id


def token_kubeconfig(cluster: Cluster, token: str) -> dict[str, Any]:
    """A kubeconfig for the local cluster that authenticates with ``token`` only."""
    conf = cluster.api.configuration
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": conf.host, "certificate-authority": conf.ssl_ca_cert}}
        ],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": "sa"}}],
        "current-context": "sa",
    }


class Tenant:
    """ServiceAccount ``tenant-b-<id>`` of ``namespace`` whose Role there has ``rules`` and nothing else."""

    def __init__(self, cluster: Cluster, namespace: str, rules: list[dict[str, Any]]) -> None:
        name = f"tenant-b-{short_id()}"
        cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
        rbac = client.RbacAuthorizationV1Api(cluster.api)
        rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            },
        )
        token = cluster.core.create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        api = config.new_client_from_config_dict(token_kubeconfig(cluster, token))
        self.name, self.namespace = name, namespace
        self.core, self.batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
