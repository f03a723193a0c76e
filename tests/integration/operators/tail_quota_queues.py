"""A second team's ClusterQueue in a cohort with a test's own, owning no quota: it runs on what the first
team's queue does not use (a shared helper of the tail-quota test and benchmark)."""

from __future__ import annotations

from ..cluster import KueueEnv, is_true, short_id, wait_for


def add_second_team(env: KueueEnv, local_queue: str = "team-b") -> str:
    """Put ``env``'s ClusterQueue in a new cohort with team B's ClusterQueue (nominal 0, borrowing ``env``'s
    flavor), and a LocalQueue ``local_queue`` in ``env``'s namespace for it; returns the cohort."""
    c, cohort, cq_b = env.cluster, f"co-{short_id()}", f"cq-b-{short_id()}"
    c.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", env.cluster_queue, {"spec": {"cohortName": cohort}}
    )
    zero = [{"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "0"}]
    c.kueue_create(
        "clusterqueues",
        {
            "kind": "ClusterQueue",
            "metadata": {"name": cq_b},
            "spec": {
                "cohortName": cohort,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": env.namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": env.flavor, "resources": zero}],
                    }
                ],
            },
        },
    )
    c.kueue_create(
        "localqueues",
        {"kind": "LocalQueue", "metadata": {"name": local_queue}, "spec": {"clusterQueue": cq_b}},
        env.namespace,
    )
    wait_for(
        f"LocalQueue {local_queue} active",
        lambda: is_true(c.kueue_get("localqueues", local_queue, env.namespace), "Active"),
        timeout=30,
    )
    env.extra_cluster_queues.append(cq_b)
    return cohort
