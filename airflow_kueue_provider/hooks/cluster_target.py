"""Which cluster a task talks to: the cncf ``kubernetes`` connection and KubernetesPodOperator's overrides of
it (``cluster_context``, ``config_file``, ``in_cluster``), one value for the operator, its hooks, its
trigger and the shared watch (one watch per target and namespace)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_CONN_ID = "kubernetes_default"


@dataclass(frozen=True)
class ClusterTarget:
    conn_id: str = DEFAULT_CONN_ID
    cluster_context: str | None = None
    """A kubeconfig context other than the connection's."""
    config_file: str | None = None
    """A kubeconfig file other than the connection's."""
    in_cluster: bool | None = None
    """Use (True) or do not use (False) the pod's in-cluster credentials, whatever the connection says."""

    @classmethod
    def of(cls, target: ClusterTarget | str) -> ClusterTarget:
        """A target, or a connection id with no overrides."""
        return target if isinstance(target, ClusterTarget) else cls(conn_id=target)

    def overrides(self) -> dict[str, Any]:
        """The overrides that are set, by KubernetesPodOperator's (and the cncf hooks') parameter names."""
        values: dict[str, Any] = {"cluster_context": self.cluster_context, "config_file": self.config_file}
        values["in_cluster"] = self.in_cluster
        return {name: value for name, value in values.items() if value is not None}

    def __str__(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in self.overrides().items())
        return f"{self.conn_id} ({extra})" if extra else self.conn_id
