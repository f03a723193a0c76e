"""A JobSet's replicated jobs on their own: their parse-time checks, the pods and requests their cost is
counted from, and the spec each becomes (the task's queue and ``spot``)."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.figures.cost import VmPrice
from airflow_kueue_provider.operators.replicated_job import (
    KueueReplicatedJob,
    ReplicatedJobBuilder,
    gang_cost_model,
    parse_replicated_jobs,
)


def test_dicts_become_replicated_jobs_and_an_unknown_field_is_named() -> None:
    parsed = parse_replicated_jobs("t", [{"name": "w", "image": "i:1"}, KueueReplicatedJob("c")], False)
    assert [rj.name for rj in parsed] == ["w", "c"]
    with pytest.raises(AirflowFailException, match=r"replicated job 'w': unknown field\(s\) imagee"):
        parse_replicated_jobs("t", [{"name": "w", "imagee": "i:1"}], False)


@pytest.mark.parametrize(
    ("given", "checkpointing", "message"),
    [
        ([], False, "replicated_jobs is empty"),
        ([{"name": "a", "checkpoint": True}, {"name": "b", "checkpoint": True}], True, "set it on one"),
        ([{"name": "a", "checkpoint": True, "replicas": 2}], True, "Set replicas=1 on it"),
        ([{"name": "a", "checkpoint": True}], False, "go together: set both or neither"),
        ([{"name": "a"}], True, "go together: set both or neither"),
    ],
)
def test_bad_replicated_jobs_fail_naming_what_to_change(
    given: list[dict[str, object]], checkpointing: bool, message: str
) -> None:
    with pytest.raises(AirflowFailException, match=message):
        parse_replicated_jobs("t", given, checkpointing)


def test_the_cost_counts_the_pods_that_run_at_once_at_their_own_requests() -> None:
    template = {"spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "2"}}}]}}}}
    workers = KueueReplicatedJob(
        "w", completions=8, parallelism=4, replicas=2, resources={"requests": {"cpu": "1"}}
    )
    coordinator = KueueReplicatedJob("c", completions=1, parallelism=5, job_template=template)
    model = gang_cost_model([workers, coordinator], VmPrice())
    assert [(p.name, p.pods, p.requests) for p in model.pod_sets] == [
        ("w", 8, {"cpu": "1"}),
        ("c", 1, {"cpu": "2"}),
    ]


def test_the_spec_takes_the_tasks_queue_and_spot() -> None:
    spec = ReplicatedJobBuilder("t", "lq", spot=True).spec(KueueReplicatedJob("w", image="i:1"), "ns", None)
    assert (spec.queue_name, spec.spot, spec.namespace, spec.image) == ("lq", True, "ns", "i:1")
    assert spec.ttl_seconds_after_finished is None  # the JobSet's TTL, not each Job's
