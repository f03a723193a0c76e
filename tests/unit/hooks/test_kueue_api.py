"""Pure helpers shared by the sync and async hooks."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.hooks import kueue_api
from airflow_kueue_provider.kueue.names import INDEX_ANNOTATION


def test_prefers_v1beta2_and_falls_back_to_v1beta1() -> None:
    both = {"versions": [{"version": "v1beta1"}, {"version": "v1beta2"}]}
    assert kueue_api.pick_version(both) == "v1beta2"
    assert kueue_api.pick_version({"versions": [{"version": "v1beta1"}]}) == "v1beta1"
    with pytest.raises(RuntimeError, match="install Kueue"):
        kueue_api.pick_version({"versions": [{"version": "v1alpha1"}]})


def test_position_of_a_pending_workload() -> None:
    pending = {
        "items": [
            {"metadata": {"name": "a"}, "positionInLocalQueue": 0, "positionInClusterQueue": 4},
            {"metadata": {"name": "b"}, "positionInLocalQueue": 1, "positionInClusterQueue": 7},
        ]
    }
    assert kueue_api.position_of(pending, "b") == (1, 7)
    assert kueue_api.position_of(pending, "zzz") is None
    assert kueue_api.pending_workloads_path("v1beta2", "ns", "lq") == (
        "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/lq/pendingworkloads"
    )


def test_pods_by_index_newest_first() -> None:
    def pod(index: str, created: str) -> dict[str, object]:
        owner = [{"kind": "Job", "name": "j", "uid": "u", "controller": True}]
        meta = {
            "annotations": {INDEX_ANNOTATION: index},
            "creationTimestamp": created,
            "ownerReferences": owner,
        }
        return {"metadata": meta}

    grouped = kueue_api.pods_by_index(
        [
            pod("1", "2026-01-01T00:00:01Z"),
            pod("1", "2026-01-01T00:00:09Z"),
            pod("0", "2026-01-01T00:00:00Z"),
        ],
        "j",
    )
    assert [p["metadata"]["creationTimestamp"] for p in grouped[1]] == [
        "2026-01-01T00:00:09Z",
        "2026-01-01T00:00:01Z",
    ]
    assert list(grouped) == [1, 0]
