"""Acceptance 4-5: TTL-after-finished, per-index failures, and Spot-like node loss with a podFailurePolicy."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from devcluster.fake_pod_lengths import RUN_REMAINING_ANNOTATION, SHARD_DURATIONS_ANNOTATION
from devcluster.manifests import GRACE_EXIT_ANNOTATION, SPOT_POOL, fake_node

from ..cluster import Cluster, KueueEnv, condition, indexed_job, is_true, short_id, wait_for

INDEX = "batch.kubernetes.io/job-completion-index"


def test_ttl_controller_deletes_a_finished_job(kueue_env: KueueEnv) -> None:
    kueue_env.create_job(
        indexed_job("short-lived", kueue_env.local_queue, completions=2, ttlSecondsAfterFinished=5)
    )
    wait_for("Complete", lambda: is_true(kueue_env.job("short-lived"), "Complete"))
    wait_for(
        "Job deleted by the TTL-after-finished controller",
        lambda: kueue_env.job("short-lived") is None,
        timeout=60,
    )


def test_index_failing_with_exit_code_3_lands_in_failed_indexes(kueue_env: KueueEnv) -> None:
    kueue_env.create_job(
        indexed_job(
            "flaky",
            kueue_env.local_queue,
            completions=4,
            parallelism=4,
            annotations={
                "kwok.airflow-kueue.io/fail-indexes": "2",
                "kwok.airflow-kueue.io/fail-exit-code": "3",
            },
            backoffLimitPerIndex=1,
        )
    )

    job = wait_for(
        "Job Failed", lambda: (j := kueue_env.job("flaky")) and is_true(j, "Failed") and j, timeout=90
    )
    assert job["status"]["failedIndexes"] == "2"
    assert job["status"]["completedIndexes"] == "0,1,3"  # Kubernetes writes a run of two as "0,1"
    assert condition(job, "Failed")["reason"] == "FailedIndexes"
    failed_pods = [p for p in kueue_env.pods("flaky") if p["status"]["phase"] == "Failed"]
    # backoffLimitPerIndex=1: the index ran twice, both times exiting with the code the annotation asked for.
    assert len(failed_pods) == 2
    for pod in failed_pods:
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "2"
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_fail_times_lets_an_index_succeed_on_retry(kueue_env: KueueEnv) -> None:
    kueue_env.create_job(
        indexed_job(
            "retry-once",
            kueue_env.local_queue,
            completions=3,
            annotations={"kwok.airflow-kueue.io/fail-indexes": "1", "kwok.airflow-kueue.io/fail-times": "1"},
            backoffLimitPerIndex=2,
        )
    )
    job = wait_for(
        "Complete", lambda: (j := kueue_env.job("retry-once")) and is_true(j, "Complete") and j, timeout=90
    )
    assert job["status"]["completedIndexes"] == "0-2"
    assert job["status"]["failed"] == 1


def test_shard_durations_make_each_pod_run_the_sum_of_its_pack(kueue_env: KueueEnv) -> None:
    """``shard-durations`` is per shard id: a pod runs the shards its index packs (the SDK's env), so a fake
    pod follows whatever packs the operator chose. Here shard 9 is long and the pack order puts it first."""
    job = indexed_job(
        "packs",
        kueue_env.local_queue,
        completions=3,
        annotations={SHARD_DURATIONS_ANNOTATION: ",".join(["0.5"] * 9 + ["3"])},
    )
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "AIRFLOW_KUEUE_SHARDS", "value": "0-9"},
        {"name": "AIRFLOW_KUEUE_SHARDS_PER_POD", "value": "4x1,3x2/9,0-8"},
    ]
    kueue_env.create_job(job)
    wait_for("Complete", lambda: is_true(kueue_env.job("packs"), "Complete"), timeout=60)
    ran = {
        int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): _ran_seconds(p)
        for p in kueue_env.pods("packs")
    }
    # index 0: shards 9, 0, 1, 2 (4.5 s); 1 and 2: three of 0.5 s (a kubelet's times are whole seconds)
    assert ran[0] >= 4 and ran[1] <= 2 and ran[2] <= 2, ran


def test_a_pod_s_run_remaining_overrides_its_pack_s_length(kueue_env: KueueEnv) -> None:
    """``run-remaining`` (the night's stand-in for a worker-SDK program skipping its done shards) is how long
    the pod runs, whatever its pack's shards would add up to."""
    job = indexed_job(
        "remainder",
        kueue_env.local_queue,
        completions=2,
        annotations={SHARD_DURATIONS_ANNOTATION: "6,6", RUN_REMAINING_ANNOTATION: "500ms"},
    )
    shards = {"name": "AIRFLOW_KUEUE_SHARDS", "value": "0-1"}
    job["spec"]["template"]["spec"]["containers"][0]["env"] = [shards]
    kueue_env.create_job(job)
    wait_for("Complete", lambda: is_true(kueue_env.job("remainder"), "Complete"), timeout=60)
    assert all(_ran_seconds(p) <= 2 for p in kueue_env.pods("remainder"))  # not 6 s each


def _ran_seconds(pod: dict[str, Any]) -> float:
    ended = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    started, finished = (
        datetime.fromisoformat(ended[k].replace("Z", "+00:00")) for k in ("startedAt", "finishedAt")
    )
    return (finished - started).total_seconds()


def test_node_loss_gives_disruption_target_which_an_ignore_rule_does_not_count(
    kueue_env_factory: Any, cluster: Cluster
) -> None:
    marker = f"spot-{short_id()}"
    node_name = f"aks-spot-{marker}"
    node = fake_node(node_name, SPOT_POOL, extra_labels={"devcluster-test-pool": marker})
    # a taint only this test's flavor tolerates: no other test's pod lands on the node it deletes
    own = {"key": "devcluster-test-pool", "value": marker, "effect": "NoSchedule"}
    node["spec"]["taints"].append(own)
    cluster.core.create_node(node)
    try:
        env = kueue_env_factory(
            node_labels={"devcluster-test-pool": marker}, tolerations=[{**own, "operator": "Equal"}]
        )
        env.create_job(
            indexed_job(
                "spot",
                env.local_queue,
                completions=2,
                run_duration="10m",
                backoffLimit=0,
                podFailurePolicy={
                    "rules": [
                        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
                    ]
                },
            )
        )
        wait_for(
            "both pods Running on the test node",
            lambda: (
                len([p for p in env.pods("spot") if p["status"].get("phase") == "Running"]) == 2
                and all(p["spec"]["nodeName"] == node_name for p in env.pods("spot"))
            ),
            timeout=60,
        )
        first_pods = {p["metadata"]["name"] for p in env.pods("spot")}

        cluster.core.delete_node(node_name)  # the Spot VM is gone

        def disrupted() -> list[dict[str, Any]]:
            return [
                p
                for p in env.pods("spot")
                if p["metadata"]["name"] in first_pods
                and (c := condition(p, "DisruptionTarget"))
                and c["status"] == "True"
            ]

        # The pod GC waits ~40 s before it treats a pod on a missing node as orphaned.
        pods = wait_for("pods with DisruptionTarget from the pod GC", disrupted, timeout=150, interval=0.5)
        assert condition(pods[0], "DisruptionTarget")["reason"] == "DeletionByPodGC"
        # Replacements are created (Pending: no node of that pool left) and the loss counts as no failure.
        wait_for(
            "replacement pods",
            lambda: len({p["metadata"]["name"] for p in env.pods("spot")} - first_pods) == 2,
            timeout=60,
        )
        job = env.job("spot")
        assert job["status"].get("failed", 0) == 0, job["status"]
        assert not is_true(job, "Failed") and not is_true(job, "FailureTarget")
    finally:
        cluster.core.delete_node(node_name, _request_timeout=10) if _node_exists(cluster, node_name) else None


def _node_exists(cluster: Cluster, name: str) -> bool:
    return any(n.metadata.name == name for n in cluster.core.list_node(label_selector="type=kwok").items)


def test_an_evicted_pod_told_grace_exit_ends_succeeded_and_told_fail_ends_failed(
    kueue_env: KueueEnv, cluster: Cluster
) -> None:
    """The night's stand-in for a worker-SDK pod that waits in its grace for its released shards: annotated
    ``grace-exit`` with a duration before its eviction, KWOK ends it Succeeded that long after (its index
    done, no next pod); "fail" ends it Failed at once, as an evicted pod without the annotation is."""
    job = indexed_job(
        "grace", kueue_env.local_queue, completions=2, run_duration="10m", backoffLimitPerIndex=1,
        podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
    )  # fmt: skip
    kueue_env.create_job(job)

    def running() -> dict[str, str]:
        pods = kueue_env.pods("grace")
        by_index = {p["metadata"]["annotations"][INDEX]: p["metadata"]["name"] for p in pods}
        return by_index if all(p["status"].get("phase") == "Running" for p in pods) and len(pods) == 2 else {}

    pods = wait_for("both pods Running", running, timeout=60)
    ns = kueue_env.namespace

    def evict(index: str, value: str) -> float:
        body = {"metadata": {"annotations": {GRACE_EXIT_ANNOTATION: value}}}
        cluster.core.patch_namespaced_pod(pods[index], ns, body)
        at = time.monotonic()
        eviction = {"metadata": {"name": pods[index], "namespace": ns}}
        cluster.core.create_namespaced_pod_eviction(pods[index], ns, eviction)
        return at

    def completed() -> str:
        return str(((kueue_env.job("grace") or {}).get("status") or {}).get("completedIndexes") or "")

    evicted = evict("0", "1500ms")
    wait_for("index 0 completed by its evicted pod", lambda: completed() == "0", timeout=30)
    assert 1.0 <= time.monotonic() - evicted < 10.0
    evicted = evict("1", "20s")
    cluster.core.patch_namespaced_pod(
        pods["1"], ns, {"metadata": {"annotations": {GRACE_EXIT_ANNOTATION: "fail"}}}
    )
    wait_for(
        "index 1's evicted pod Failed", lambda: _phase(kueue_env, pods["1"]) in (None, "Failed"), timeout=30
    )
    assert time.monotonic() - evicted < 10.0 and completed() == "0"
    index_0 = [
        p["metadata"]["name"] for p in kueue_env.pods("grace") if p["metadata"]["annotations"][INDEX] == "0"
    ]
    assert set(index_0) <= {pods["0"]}, f"index 0 got a next pod: {index_0}"


def _phase(env: KueueEnv, name: str) -> str | None:
    pod = next((p for p in env.pods("grace") if p["metadata"]["name"] == name), None)
    return None if pod is None else pod["status"].get("phase")
