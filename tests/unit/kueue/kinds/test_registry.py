"""Each job kind is described once; what tells kinds apart is checked when one registers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from airflow_kueue_provider.kueue import kinds
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET
from airflow_kueue_provider.kueue.kinds.registry import unregister


def _done(kind: str, status: str = "True") -> dict[str, object]:
    return {"status": {"conditions": [{"type": kind, "status": status}]}}


@pytest.fixture
def forget_ray() -> Iterator[None]:
    yield
    unregister("RayJob")


def test_the_built_in_kinds_are_registered_with_their_own_keys() -> None:
    assert kinds.describe("Job") is JOB and kinds.describe("JobSet") is JOBSET
    assert (JOB.name_key, JOBSET.name_key) == ("job_name", "jobset_name")
    assert kinds.kind_of_keys({"jobset_name": "x"}) is JOBSET
    assert kinds.kind_of_keys({"status": "success"}) is JOB  # a version-1 event of a Job


def test_each_kind_ends_by_its_own_rule_and_never_by_another_kinds() -> None:
    assert JOB.finished(_done("Complete")) and JOB.succeeded(_done("Complete"))
    assert JOB.finished(_done("Completed")) is None  # a JobSet's success is not a Job's
    assert JOBSET.succeeded(_done("Completed")) and not JOBSET.succeeded(_done("Failed"))
    assert kinds.finished_condition(_done("Completed")) is not None
    assert kinds.finished_condition(_done("Complete", "False")) is None
    assert kinds.succeeded(_done("Complete")) and not kinds.succeeded(_done("Failed"))


def test_an_unknown_kind_is_named_with_the_known_ones() -> None:
    with pytest.raises(kinds.UnknownKind, match=r"'Pod' is not registered \(known: .*'Job'"):
        kinds.describe("Pod")


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("key_prefix", "job", "name_key 'job_name' is Job's"),
        ("secret_tag", "jobset-", "secret_tag 'jobset-' is JobSet's"),
        ("secret_tag", "abc-", "not hex"),
        ("secret_tag", "ray", "ending in '-'"),
    ],
)
def test_a_kind_that_would_be_mistaken_for_another_is_refused(
    forget_ray: None, field: str, value: str, why: str
) -> None:
    ray = replace(
        JOBSET, kind="RayJob", key_prefix="rayjob", secret_tag="ray-",
        api=kinds.ApiCoordinates("ray.io", "v1", "rayjobs"),
    )  # fmt: skip
    with pytest.raises(ValueError, match=why):
        changes: dict[str, Any] = {field: value}
        kinds.register(replace(ray, **changes))
    assert kinds.register(ray) is kinds.describe("RayJob")


def test_a_child_job_names_its_parent_by_the_parents_child_label() -> None:
    child = {"metadata": {"labels": {JOBSET.child_label: "genomics"}}}
    assert kinds.parent_names(child) == [(JOBSET, "genomics")]
    assert kinds.parent_names({"metadata": {}}) == []
