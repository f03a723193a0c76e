"""The recorder's reduced views of Workloads, Jobs and pods, and a History's round trip through JSON."""

from __future__ import annotations

from pathlib import Path

from airflow_kueue_provider.kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    DAG_ID_LABEL,
    RUN_ID_LABEL,
    SEAL_ANNOTATION,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
)
from tests.integration.soak.history import (
    Gap,
    History,
    Observation,
    TaskOutcome,
    job_view,
    pod_view,
    read_items,
    workload_view,
)

WORKLOAD = {
    "metadata": {
        "creationTimestamp": "2026-12-02T10:00:00Z",
        "ownerReferences": [{"kind": "Job", "name": "job-a", "uid": "u-job"}],
    },
    "spec": {"podSets": [{"name": "main", "count": 4}]},
    "status": {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "count": 4, "resourceUsage": {"cpu": "1", "memory": "1Gi"}}
            ],
        },
        "reclaimablePods": [{"name": "main", "count": 1}],
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-12-02T10:00:05Z"},
            {"type": "Evicted", "status": "False", "lastTransitionTime": "2026-12-02T10:00:00Z"},
        ],
    },
}


def test_a_workload_holds_its_admitted_quota_less_the_reclaimable_pods() -> None:
    view = workload_view(WORKLOAD)
    assert view["job_uid"] == "u-job" and view["cluster_queue"] == "cq"
    assert view["usage"] == {"cpu": 0.75, "memory": 0.75 * 2**30}
    assert view["conditions"]["QuotaReserved"][0] is True
    assert view["conditions"]["QuotaReserved"][1] - view["created"] == 5
    assert view["conditions"]["Evicted"][0] is False


def test_a_job_names_its_task_instance_try_seal_and_checkpoints() -> None:
    annotations = {DAG_ID_LABEL: "d", TASK_ID_LABEL: "t", RUN_ID_LABEL: "r", TRY_NUMBER_LABEL: "2"}
    job = {
        "metadata": {"annotations": {**annotations, SEAL_ANNOTATION: "x"}},
        "spec": {
            "completions": 3,
            "template": {"spec": {"containers": [{"env": [{"name": CHECKPOINT_PREFIX_ENV, "value": "p"}]}]}},
        },
    }
    view = job_view(job)
    assert view["identity"]["try_number"] == "2" and view["identity"]["map_index"] is None
    assert view["sealed"] and view["checkpoint_prefix"] == "p" and view["completions"] == 3


def test_a_pod_names_its_job_node_and_container_times() -> None:
    pod = {
        "metadata": {"ownerReferences": [{"kind": "Job", "name": "j", "uid": "u"}]},
        "spec": {"nodeName": "proc-spot-0", "terminationGracePeriodSeconds": 20},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"state": {"running": {"startedAt": "2026-12-02T10:00:07Z"}}}],
        },
    }
    view = pod_view(pod)
    assert view["job_uid"] == "u" and view["node"] == "proc-spot-0" and view["grace"] == 20
    assert view["started"] is not None and view["finished"] is None


def test_a_history_survives_json_and_a_torn_items_line_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "items.log"
    log.write_text("0:1 pod-a 10.5\n0:2 pod-a 11.0\n0:3 pod")
    items = read_items([log, tmp_path / "missing.log"])
    assert [i["item"] for i in items] == [1, 2]
    history = History(
        start=1.0,
        end=2.0,
        observations=[Observation(1.5, "Job", "ADDED", "ns", "j", "u", {"identity": {}}, 0)],
        gaps=[Gap("Pod", 1.2, 1.4)],
        items=items,
        tasks=[TaskOutcome("d", "t", "r", -1, "success", 1, {"completions": 1})],
    )
    history.save(tmp_path / "history.json")
    assert History.load(tmp_path / "history.json") == history
