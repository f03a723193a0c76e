"""The provider's ``[kueue]`` options as read on a worker (one home for their names and defaults)."""

from __future__ import annotations

from ..airflow_compat import task_conf
from ..kueue.pod_policy import PodPolicy

SECTION = "kueue"
POD_POLICY_OPTIONS = (
    "allowed_namespaces",
    "allowed_service_accounts",
    "allow_privileged_pods",
    "allow_host_namespaces",
    "allow_host_path_volumes",
    "allowed_capabilities",
)


def configured_pod_policy() -> PodPolicy:
    """The platform team's pod policy from ``[kueue]`` (env ``AIRFLOW__KUEUE__<OPTION>`` works too)."""
    conf = task_conf()
    return PodPolicy.from_options({key: conf.get(SECTION, key, fallback=None) for key in POD_POLICY_OPTIONS})
